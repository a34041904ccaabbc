"""The appliance end to end: the .deb installed by scripts/flash/install-into-rootfs.sh
into a clean Debian 12 root (debootstrap minbase plus python3 and python3-venv)
with the network cut, then checked from inside the root: the command, the
settings check, the edgebox user, the unit and its enablement, the conffiles,
`edgebox serve` answering /v2/health/ready on loopback, a second run that
changes nothing, an upgrade that keeps an edited config and an added model,
and a purge that removes the state.

Opt-in and slow, run by `make test-appliance`: EDGEBOX_APPLIANCE=1 (amd64,
a few minutes the first time: the package build and debootstrap; the
bootstrapped root is cached as a tar in .appliance/), and
EDGEBOX_APPLIANCE_ARM64=1 as well for the arm64 package in an arm64 root
under qemu-user-static (much slower). Needs root (chroot, mounts),
debootstrap, unshare, the package build's tools (tests/packaging/test_build_deb.py)
and network access to a Debian mirror ($EDGEBOX_DEBIAN_MIRROR) and PyPI the
first time. The package is reused from dist/ or .appliance/deb/ when it is
newer than every file of the working tree and made for Python 3.11.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from daemon_process import wait_for

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".appliance"
INSTALL = ROOT / "scripts" / "flash" / "install-into-rootfs.sh"
MIRROR = os.environ.get("EDGEBOX_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PYTHON = "3.11"
"""Debian 12's python3."""

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("EDGEBOX_APPLIANCE") != "1",
        reason="builds a Debian root and installs the .deb only when EDGEBOX_APPLIANCE=1 is set",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chroot, mounts, debootstrap"),
    pytest.mark.skipif(
        not all(shutil.which(tool) for tool in ("debootstrap", "unshare", "chroot", "dpkg-deb")),
        reason="needs debootstrap, unshare and dpkg-deb (apt-get install debootstrap)",
    ),
    pytest.mark.timeout(1800),
]


def qemu_problem() -> str | None:
    """Why an arm64 root cannot run here, or None."""
    if os.environ.get("EDGEBOX_APPLIANCE_ARM64") != "1":
        return "the arm64 root under qemu runs only when EDGEBOX_APPLIANCE_ARM64=1 is set (slow)"
    if not Path("/usr/bin/qemu-aarch64-static").exists():
        return "needs qemu-user-static (apt-get install qemu-user-static binfmt-support)"
    entry = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    if not entry.exists():
        return ("no binfmt_misc handler qemu-aarch64 registered, and this container cannot "
                "register one (update-binfmts --enable qemu-aarch64 on the host)")
    if not entry.read_text().startswith("enabled"):
        return "the binfmt_misc handler qemu-aarch64 is disabled (update-binfmts --enable qemu-aarch64)"
    return None


def host_arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module", params=["amd64", "arm64"])
def arch(request) -> str:
    if request.param != host_arch() and (problem := qemu_problem()):
        pytest.skip(problem)
    return request.param


# --- the package --------------------------------------------------------------------


def newest_source_mtime() -> float:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")
    return max((ROOT / os.fsdecode(name)).stat().st_mtime
               for name in files if name and (ROOT / os.fsdecode(name)).is_file())


def control_field(deb: Path, field: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def fresh_deb(arch: str) -> Path | None:
    """A package built after the last change to the tree, for Debian 12's Python."""
    newest = newest_source_mtime()
    for folder in (ROOT / "dist", CACHE / "deb"):
        for deb in sorted(folder.glob(f"edgebox_*_{arch}.deb"), key=lambda p: p.stat().st_mtime,
                          reverse=True):
            if (deb.stat().st_mtime > newest
                    and f"python3 (>= {PYTHON}~)" in control_field(deb, "Depends")):
                return deb
    return None


@pytest.fixture(scope="module")
def deb(arch) -> Path:
    found = fresh_deb(arch)
    if found:
        return found
    out = CACHE / "deb"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"edgebox_*_{arch}.deb"):
        old.unlink()
    result = subprocess.run(
        [str(ROOT / "scripts" / "build_deb.sh"), "--arch", arch, "--python", PYTHON,
         "--out", str(out)],
        env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (built,) = out.glob(f"edgebox_*_{arch}.deb")
    return built


@pytest.fixture(scope="module")
def upgrade_deb(deb, tmp_path_factory) -> Path:
    """The same package with a later version: what an upgrade sees."""
    work = tmp_path_factory.mktemp("repack")
    tree = work / "tree"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True, timeout=300)
    control = tree / "DEBIAN" / "control"
    version = control_field(deb, "Version")
    text = control.read_text()
    control.write_text(text.replace(f"Version: {version}\n", f"Version: {version}+upgrade1\n"))
    out = work / f"edgebox_{version}+upgrade1_{control_field(deb, 'Architecture')}.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "-z1", "-b", str(tree), str(out)], check=True,
                   capture_output=True, timeout=600)
    return out


# --- the Debian root ----------------------------------------------------------------


def cached_root_tar(arch: str) -> Path:
    """Debian 12 minbase with python3 and python3-venv (debootstrap --include,
    so with the network, before anything of edgebox), tarred once."""
    tar = CACHE / f"bookworm-{arch}-minbase-python3.tar"
    if tar.exists():
        return tar
    CACHE.mkdir(exist_ok=True)
    work = CACHE / f"bootstrap-{arch}"
    shutil.rmtree(work, ignore_errors=True)
    result = subprocess.run(
        ["debootstrap", "--variant=minbase", f"--arch={arch}", "--include=python3,python3-venv",
         "bookworm", str(work), MIRROR],
        capture_output=True, text=True, timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    partial = tar.with_suffix(".partial")
    subprocess.run(["tar", "-C", str(work), "--numeric-owner", "-cf", str(partial), "."],
                   check=True, timeout=600)
    partial.rename(tar)
    shutil.rmtree(work)
    return tar


def new_root(arch: str, parent: Path) -> Path:
    root = parent / "root"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-xf", str(cached_root_tar(arch))],
                   check=True, timeout=600)
    return root


def in_root(root: Path, *command: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """COMMAND in the root with no network; the mounts die with the namespace."""
    script = ('mount -t proc proc "$0/proc" && mount --bind /dev "$0/dev" && '
              'exec chroot "$0" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 '
              '"$@"')
    return subprocess.run(
        ["unshare", "--mount", "--net", "--propagation", "private", "--", "sh", "-ec", script,
         str(root), *command],
        capture_output=True, text=True, timeout=timeout_s,
    )


def install(root: Path, deb: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([str(INSTALL), str(root), "--deb", str(deb), *args],
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result


def edgebox_ids(root: Path) -> tuple[int, int]:
    for line in (root / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == "edgebox":
            return int(fields[2]), int(fields[3])
    raise AssertionError("no edgebox user in the root's /etc/passwd")


def config_with_port(tmp_path: Path, http_port: int) -> Path:
    text = (ROOT / "etc" / "edgebox.yaml").read_text()
    assert "\nhttp_port: 8000\n" in text
    config = tmp_path / "edgebox.yaml"
    config.write_text(text.replace("\nhttp_port: 8000\n", f"\nhttp_port: {http_port}\n"))
    return config


@pytest.fixture(scope="module")
def installed(arch, deb, tmp_path_factory) -> Path:
    """A root with the package, a config (HTTP port 8123) and the demo repository."""
    work = tmp_path_factory.mktemp(f"installed-{arch}")
    root = new_root(arch, work)
    install(root, deb, "--config", str(config_with_port(work, 8123)),
            "--repository", str(ROOT / "model_repository"))
    return root


# --- what the install left ----------------------------------------------------------


def test_offline_install_gives_a_working_command_and_a_valid_config(installed, deb):
    version = in_root(installed, "edgebox", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"edgebox {control_field(deb, 'Version').split('-')[0]}"

    check = in_root(installed, "edgebox", "check", "--config", "/etc/edgebox/edgebox.yaml")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith("/etc/edgebox/edgebox.yaml: ok (repository "
                                   "/var/lib/edgebox/models in poll mode; ports http 8123,")


def test_install_creates_the_system_user_owning_the_models(installed):
    (entry,) = [line for line in (installed / "etc" / "passwd").read_text().splitlines()
                if line.startswith("edgebox:")]
    assert entry.split(":")[5:] == ["/var/lib/edgebox", "/usr/sbin/nologin"]
    uid, gid = edgebox_ids(installed)
    assert uid < 1000
    models = installed / "var" / "lib" / "edgebox" / "models"
    assert (models / "add_sub" / "config.pbtxt").exists()
    owners = {(path.stat().st_uid, path.stat().st_gid) for path in [models, *models.rglob("*")]}
    assert owners == {(uid, gid)}


def test_unit_is_installed_and_enabled_for_boot(installed):
    unit = installed / "lib" / "systemd" / "system" / "edgebox.service"
    assert "ExecStart=/opt/edgebox/venv/bin/edgebox serve" in unit.read_text()
    link = installed / "etc" / "systemd" / "system" / "multi-user.target.wants" / "edgebox.service"
    assert os.readlink(link) == "/lib/systemd/system/edgebox.service"


def test_settings_are_dpkg_conffiles(installed):
    result = in_root(installed, "dpkg-query", "-W", "-f=${Conffiles}", "edgebox")
    assert result.returncode == 0, result.stderr
    paths = sorted(line.split()[0] for line in result.stdout.strip().splitlines())
    assert paths == ["/etc/edgebox/edgebox.yaml", "/etc/edgebox/extra-requirements.txt"]


def test_settings_file_is_readable_by_the_daemon_and_not_by_every_user(installed):
    # It holds the dashboard's password hash once `edgebox passwd` has run.
    config = (installed / "etc" / "edgebox" / "edgebox.yaml").stat()
    _, gid = edgebox_ids(installed)
    assert (config.st_uid, config.st_gid, config.st_mode & 0o777) == (0, gid, 0o640)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ready_status(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def test_serve_inside_the_root_answers_ready_on_loopback(installed, arch, tmp_path):
    http, grpc, metrics = free_port(), free_port(), free_port()
    log = tmp_path / "serve.log"
    # chroot --userspec execs edgebox in this very process: SIGTERM reaches it.
    # /sys as on a device: ONNX Runtime reads the CPU list there (aarch64 aborts without it).
    script = ('mount -t proc proc "$0/proc" && mount --bind /sys "$0/sys" && '
              'mount --bind /dev "$0/dev" && exec chroot --userspec=edgebox:edgebox "$0" /usr/bin/env -i '
              'PATH=/usr/bin:/bin HOME=/var/lib/edgebox LC_ALL=C.UTF-8 "$@"')
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script,
             str(installed), "edgebox", "serve", "--config", "/etc/edgebox/edgebox.yaml",
             "--host", "127.0.0.1", "--http-port", str(http), "--grpc-port", str(grpc),
             "--metrics-port", str(metrics), "--dashboard-enabled", "false"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: ready_status(http) == 200 or daemon.poll() is not None,
                 timeout_s=60 if arch == host_arch() else 600, interval_s=0.2,
                 what="/v2/health/ready inside the root")
        assert daemon.poll() is None, log.read_text()
        assert ready_status(http) == 200, log.read_text()
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            code = daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            code = daemon.wait()
    assert code == 0, log.read_text()


# --- twice, upgrade, purge -------------------------------------------------------------


def snapshot(root: Path) -> dict[str, str]:
    """What the install decides: package state, files under its paths with owners."""
    seen = {}
    for top in ("etc/edgebox", "etc/systemd/system", "var/lib/edgebox", "opt/edgebox"):
        for path in sorted((root / top).rglob("*")):
            stat = path.lstat()
            if path.is_symlink():
                what = "-> " + os.readlink(path)
            elif path.is_file():
                what = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                what = "dir"
            seen[str(path.relative_to(root))] = f"{stat.st_uid}:{stat.st_gid} {stat.st_mode:o} {what}"
    status = in_root(root, "dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Version}", "edgebox")
    seen["dpkg"] = status.stdout
    return seen


def test_installing_twice_changes_nothing(installed, deb, tmp_path):
    config = config_with_port(tmp_path, 8123)
    before = snapshot(installed)

    result = install(installed, deb, "--config", str(config),
                     "--repository", str(ROOT / "model_repository"))

    assert "is already installed in" in result.stdout
    assert snapshot(installed) == before
    assert not any((installed / "tmp").iterdir())
    assert not (installed / "usr" / "sbin" / "policy-rc.d").exists()


def test_upgrade_keeps_the_edited_config_and_added_models(arch, deb, upgrade_deb, tmp_path):
    root = new_root(arch, tmp_path)
    install(root, deb)
    config = root / "etc" / "edgebox" / "edgebox.yaml"
    edited = config.read_text().replace("\nhttp_port: 8000\n", "\nhttp_port: 8124\n")
    assert edited != config.read_text()
    config.write_text(edited)
    uid, gid = edgebox_ids(root)
    added = root / "var" / "lib" / "edgebox" / "models" / "my_model"
    shutil.copytree(ROOT / "model_repository" / "add_sub", added)
    for path in [added, *added.rglob("*")]:
        os.chown(path, uid, gid)
    added_files = sorted(str(p.relative_to(added)) for p in added.rglob("*"))

    install(root, upgrade_deb)

    status = in_root(root, "dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Version}", "edgebox")
    assert status.stdout == f"ii  {control_field(upgrade_deb, 'Version')}"
    assert config.read_text() == edited
    assert sorted(str(p.relative_to(added)) for p in added.rglob("*")) == added_files
    assert (root / "var" / "lib" / "edgebox" / "models" / "add_sub").is_dir()
    version = in_root(root, "edgebox", "--version")
    assert version.returncode == 0, version.stderr


def test_purge_removes_the_state_and_the_virtualenv(arch, deb, tmp_path):
    root = new_root(arch, tmp_path)
    install(root, deb)
    assert (root / "var" / "lib" / "edgebox" / "models" / "add_sub").is_dir()

    result = in_root(root, "dpkg", "--purge", "edgebox")

    assert result.returncode == 0, result.stdout + result.stderr
    for gone in ("var/lib/edgebox", "opt/edgebox", "etc/edgebox", "usr/bin/edgebox",
                 "etc/systemd/system/multi-user.target.wants/edgebox.service"):
        assert not (root / gone).exists() and not (root / gone).is_symlink(), gone
    assert "edgebox:" not in (root / "etc" / "passwd").read_text()
