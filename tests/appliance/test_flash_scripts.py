"""scripts/flash/install-into-rootfs.sh refuses what it cannot install into,
before it needs root or touches anything: fake roots built under tmp_path
(a dpkg status file, an ELF /bin/sh). And both appliance scripts pass
shellcheck. Fast; needs bash and dpkg-deb."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "flash" / "install-into-rootfs.sh"

pytestmark = pytest.mark.skipif(
    not shutil.which("dpkg-deb"), reason="needs dpkg-deb (apt-get install dpkg)"
)

PACKAGE_STANZA = "Package: {name}\nStatus: install ok installed\nVersion: {version}\nArchitecture: {arch}\n\n"


def host_arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


def fake_root(parent: Path, packages: dict[str, str]) -> Path:
    """A root whose /bin/sh is this machine's (so its architecture), with the
    given packages marked installed in its dpkg database."""
    root = parent / "rootfs"
    for folder in ("bin", "etc", "var/lib/dpkg", "tmp"):
        (root / folder).mkdir(parents=True)
    shutil.copy(Path("/bin/sh").resolve(), root / "bin" / "dash")
    (root / "bin" / "sh").symlink_to("dash")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    (root / "var" / "lib" / "dpkg" / "status").write_text("".join(
        PACKAGE_STANZA.format(name=name, version=version, arch=host_arch())
        for name, version in packages.items()))
    return root


def fake_deb(folder: Path, arch: str, depends: str = "python3-venv") -> Path:
    package = folder / f"pkg-{arch}"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text(
        f"Package: edgebox\nVersion: 0.1.0-1\nArchitecture: {arch}\nDepends: {depends}\n"
        "Maintainer: test <test@example.com>\nDescription: fake\n")
    deb = folder / f"edgebox_0.1.0-1_{arch}.deb"
    subprocess.run(["dpkg-deb", "--build", str(package), str(deb)], check=True,
                   capture_output=True, timeout=60)
    return deb


def install(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(INSTALL), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def test_install_refuses_a_folder_that_is_not_a_root(tmp_path):
    (tmp_path / "bin").mkdir()

    result = install(tmp_path, "--deb", tmp_path / "none.deb")

    assert result.returncode == 1
    assert result.stderr == (f"install-into-rootfs.sh: '{tmp_path}' is not a Debian/Ubuntu "
                             "root filesystem: no /var/lib/dpkg/status\n")


def test_install_refuses_this_machine_root(tmp_path):
    result = install("/", "--deb", tmp_path / "none.deb")

    assert result.returncode == 1
    assert result.stderr.startswith("install-into-rootfs.sh: ROOTFS is '/': this script "
                                    "installs into another root")


def test_install_refuses_a_package_for_another_architecture(tmp_path):
    root = fake_root(tmp_path, {"python3": "3.11.2-1", "python3-venv": "3.11.2-1"})
    other = "arm64" if host_arch() != "arm64" else "amd64"
    deb = fake_deb(tmp_path, other)

    result = install(root, "--deb", deb)

    assert result.returncode == 1
    assert result.stderr == (f"install-into-rootfs.sh: --deb '{deb}' is for {other}, the root "
                             f"'{root}' is {host_arch()}: build it with scripts/build_deb.sh "
                             f"--arch {host_arch()}\n")


def test_install_stops_when_the_root_lacks_python3_venv(tmp_path):
    root = fake_root(tmp_path, {"python3": "3.11.2-1", "adduser": "3.134"})
    deb = fake_deb(tmp_path, host_arch())

    result = install(root, "--deb", deb)

    assert result.returncode == 1
    assert result.stderr == (
        f"install-into-rootfs.sh: the root '{root}' has no python3-venv, which edgebox's "
        "postinst needs to build its virtualenv; add it before flashing (with network): "
        'docs/appliance.md, "Preparing the root"\n')
    assert not any((root / "tmp").iterdir())


def test_install_stops_when_the_root_python_is_not_the_package_one(tmp_path):
    root = fake_root(tmp_path, {"python3": "3.11.2-1", "python3-venv": "3.11.2-1",
                                "adduser": "3.134"})
    deb = fake_deb(tmp_path, host_arch(),
                   depends="python3 (>= 3.10~), python3 (<< 3.11), python3-venv")

    result = install(root, "--deb", deb)

    assert result.returncode == 1
    assert result.stderr == (
        "install-into-rootfs.sh: the root has python3 3.11.2-1, this package needs python3 "
        "(<< 3.11): build it with scripts/build_deb.sh --python <the root's Python>\n")


def test_appliance_scripts_pass_shellcheck():
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make test-appliance` installs it "
                    "(apt-get install shellcheck)")
    result = subprocess.run(["shellcheck", str(INSTALL), str(ROOT / "scripts" / "provision.sh")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout
