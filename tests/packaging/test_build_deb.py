"""Builds the .deb with scripts/build_deb.sh and looks inside it: the amd64
package for Python 3.11 (this machine's Debian 12), whose wheelhouse must
install with the network cut, and the arm64 package for Python 3.10 (JetPack 6),
whose wheel tags are checked.

Opt-in (two dpkg-buildpackage runs and the wheel downloads from PyPI, about a
minute): EDGEBOX_BUILD_DEB=1, on a machine with dpkg-dev, debhelper, git,
python3-pip, python3-setuptools and python3-wheel installed, and network
access to PyPI for the build (not for the install test).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from wheel_tags import runs_on

import edgebox

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("EDGEBOX_BUILD_DEB") != "1",
        reason="builds the .deb only when EDGEBOX_BUILD_DEB=1 is set",
    ),
    pytest.mark.skipif(
        not all(shutil.which(tool) for tool in ("dpkg-buildpackage", "dh", "dpkg-deb", "git")),
        reason="needs dpkg-dev, debhelper and git (apt-get install dpkg-dev debhelper git)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("onnx") is None,
        reason="needs onnx in this Python to generate the demo model (pip install -e .[test])",
    ),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout"),
    pytest.mark.timeout(600),
]

WHEELHOUSE = "usr/lib/edgebox/wheelhouse"


def build(out: Path, arch: str, python: str) -> Path:
    result = subprocess.run(
        [str(ROOT / "scripts" / "build_deb.sh"), "--arch", arch, "--python", python,
         "--out", str(out)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (path,) = out.glob(f"edgebox_*_{arch}.deb")
    return path


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("deb"), "amd64", "3.11")


@pytest.fixture(scope="module")
def unpacked(deb, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("root")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, timeout=60)
    return root


@pytest.fixture(scope="module")
def arm64_deb(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("deb-arm64"), "arm64", "3.10")


def dpkg_deb(*args: str) -> str:
    return subprocess.run(
        ["dpkg-deb", *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def test_package_metadata(deb):
    assert dpkg_deb("-f", str(deb), "Package").strip() == "edgebox"
    assert dpkg_deb("-f", str(deb), "Architecture").strip() == "amd64"
    assert deb.name == f"edgebox_{edgebox.__version__}-1_amd64.deb"
    depends = dpkg_deb("-f", str(deb), "Depends").strip()
    assert depends.startswith("python3 (>= 3.11~), python3 (<< 3.12), ")
    assert dpkg_deb("-f", str(deb), "Version").strip().startswith(edgebox.__version__ + "-")


def test_package_contents(deb):
    listing = dpkg_deb("-c", str(deb))
    names = {line.split()[5].removeprefix(".") for line in listing.splitlines()}
    units = {"/lib/systemd/system/edgebox.service", "/usr/lib/systemd/system/edgebox.service"}
    assert names & units
    for expected in (
        "/etc/edgebox/edgebox.yaml",
        "/etc/edgebox/extra-requirements.txt",
        f"/usr/share/edgebox/wheels/edgebox-{edgebox.__version__}-py3-none-any.whl",
        "/usr/share/edgebox/constraints.txt",
        "/usr/share/edgebox/model_repository/add_sub/1/model.onnx",
        "/usr/share/edgebox/model_repository/multiply/1/model.py",
        "/usr/share/edgebox/model_repository/square_diff/1/",
        "/usr/share/doc/edgebox/appliance.md",
        "/usr/bin/edgebox",
    ):
        assert expected in names, f"{expected} not in the package"


def test_conffiles_and_maintainer_scripts(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-e", str(deb), str(tmp_path)], check=True, timeout=30)
    conffiles = (tmp_path / "conffiles").read_text().split()
    assert "/etc/edgebox/edgebox.yaml" in conffiles
    postinst = (tmp_path / "postinst").read_text()
    assert "deb-systemd-helper enable 'edgebox.service'" in postinst
    assert postinst.index("switch_venv\n") < postinst.index("deb-systemd-invoke")


def test_packaged_unit_is_the_repository_unit(unpacked):
    (unit,) = unpacked.glob("**/systemd/system/edgebox.service")
    assert unit.read_bytes() == (ROOT / "systemd" / "edgebox.service").read_bytes()
    (wheel,) = unpacked.glob("usr/share/edgebox/wheels/*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"edgebox/daemon.py", "edgebox/cli.py"} <= names
    assert not any(name.startswith(("tests/", "model_repository/")) for name in names)


def locked_versions() -> dict[str, str]:
    lines = (ROOT / "debian" / "wheelhouse.lock").read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))


def wheelhouse_of(deb: Path) -> list[str]:
    listing = dpkg_deb("-c", str(deb))
    prefix = f"./{WHEELHOUSE}/"
    return sorted(
        line.split()[5].removeprefix(prefix)
        for line in listing.splitlines()
        if line.split()[5].startswith(prefix) and line.endswith(".whl")
    )


@pytest.mark.parametrize(("arch", "python"), [("amd64", "3.11"), ("arm64", "3.10")])
def test_wheelhouse_is_the_lock_for_the_target(arch, python, request):
    package = request.getfixturevalue("deb" if arch == "amd64" else "arm64_deb")
    wheels = wheelhouse_of(package)
    not_for_target = [name for name in wheels if not runs_on(name, arch, python)]
    assert not_for_target == [], f"not for {arch} CPython {python}"
    versions = {str(parse_wheel_filename(name)[0]): str(parse_wheel_filename(name)[1])
                for name in wheels}
    assert len(versions) == len(wheels), f"one wheel per project: {wheels}"
    assert versions == locked_versions()
    assert dpkg_deb("-f", str(package), "Architecture").strip() == arch


def test_dashboard_assets_are_inside_and_load_nothing_from_elsewhere(unpacked):
    web = unpacked / "usr/share/edgebox/web"
    assert (web / "static/vendor/uPlot.iife.min.js").stat().st_size > 10_000
    (wheel,) = unpacked.glob("usr/share/edgebox/wheels/*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    data = f"edgebox-{edgebox.__version__}.data/data/share/edgebox/web/"
    assert data + "static/vendor/uPlot.iife.min.js" in names
    assert data + "templates/base.html" in names
    for template in (web / "templates").glob("*.html"):
        text = template.read_text()
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", text), template.name


_NEEDS_ROOT_AND_UNSHARE = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"),
    reason="cuts the network with unshare -n, which needs root",
)
_NEEDS_DEBIAN_12_PYTHON = pytest.mark.skipif(
    not Path("/usr/bin/python3").exists()
    or subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; assert sys.version_info[:2] == (3, 11)"],
        check=False,
        timeout=30,
    ).returncode
    != 0,
    reason="the amd64 package's wheelhouse is for /usr/bin/python3 3.11 (Debian 12)",
)


def offline_install_on_debian_12(test):
    """Marks a test that installs the amd64 package's wheelhouse with the
    network cut: it needs root, ``unshare`` and Debian 12's python3."""
    return _NEEDS_ROOT_AND_UNSHARE(_NEEDS_DEBIAN_12_PYTHON(test))


@offline_install_on_debian_12
def test_wheelhouse_installs_edgebox_with_the_network_cut(unpacked, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    wheelhouse = unpacked / WHEELHOUSE
    (wheel,) = unpacked.glob("usr/share/edgebox/wheels/*.whl")
    offline = ["unshare", "-n", "--"]
    env = {"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}
    install = subprocess.run(
        [*offline, str(venv / "bin/python"), "-m", "pip", "install", "--no-cache-dir",
         "--disable-pip-version-check", "--no-index", "--find-links", str(wheelhouse),
         "--constraint", str(unpacked / "usr/share/edgebox/constraints.txt"),
         str(wheel), *map(str, wheelhouse.glob("onnxruntime*.whl"))],
        env=env, capture_output=True, text=True, timeout=400,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    version = subprocess.run([*offline, str(venv / "bin/edgebox"), "--version"],
                             env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert edgebox.__version__ in version.stdout + version.stderr
    imports = subprocess.run(
        [*offline, str(venv / "bin/python"), "-c", "import edgebox.daemon, onnxruntime, numpy; "
         "print(numpy.__version__)"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert imports.returncode == 0, imports.stderr
    assert imports.stdout.strip() == locked_versions()["numpy"]


def fake_onnxruntime_gpu(folder: Path, tag: str) -> Path:
    """A stand-in for NVIDIA's Jetson wheel: named and tagged as theirs are
    (linux_<machine>, not manylinux), with onnxruntime's dependencies."""
    dist = "onnxruntime_gpu-1.23.0.dist-info"
    files = {
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.23.0\n"
        "Requires-Dist: coloredlogs\nRequires-Dist: numpy>=1.21.6\nRequires-Dist: sympy\n",
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
    }
    path = folder / f"onnxruntime_gpu-1.23.0-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{dist}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{dist}/RECORD"]))
    return path


def build_amd64_with(wheel: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """build_deb.sh for amd64 and Python 3.11 with ``--onnxruntime-wheel``."""
    return subprocess.run(
        [str(ROOT / "scripts" / "build_deb.sh"), "--arch", "amd64", "--python", "3.11",
         "--onnxruntime-wheel", str(wheel), "--out", str(out)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_onnxruntime_wheel_replaces_the_cpu_build(tmp_path):
    wheel = fake_onnxruntime_gpu(tmp_path, "cp311-cp311-linux_x86_64")
    result = build_amd64_with(wheel, tmp_path / "out")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (package,) = (tmp_path / "out").glob("edgebox_*_amd64.deb")
    wheels = wheelhouse_of(package)
    assert wheel.name in wheels
    assert not [name for name in wheels if name.startswith("onnxruntime-")]
    assert any(name.startswith("sympy-") for name in wheels)


def test_onnxruntime_wheel_for_another_target_stops_the_build(tmp_path):
    wheel = fake_onnxruntime_gpu(tmp_path, "cp310-cp310-linux_aarch64")
    result = build_amd64_with(wheel, tmp_path / "out")
    assert result.returncode != 0
    assert f"{wheel.name} is not a supported wheel on this platform" in result.stderr
    assert not (tmp_path / "out").exists()


@offline_install_on_debian_12
def test_postinst_builds_the_virtualenv_with_the_network_cut(deb, unpacked, tmp_path):
    """The package's own build_venv, its paths moved under tmp_path."""
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", str(deb), str(control)], check=True, timeout=30)
    functions = (control / "postinst").read_text().partition('\ncase "$1" in')[0]
    for path in ("/usr/share/edgebox", "/usr/lib/edgebox", "/etc/edgebox"):
        functions = functions.replace(f"={path}", f"={unpacked}{path}")
    functions = functions.replace("OPT=/opt/edgebox", f"OPT={tmp_path}/opt")
    script = tmp_path / "build_venv.sh"
    script.write_text(functions + '\nbuild_venv\necho "built $NEW_VENV"\n')
    result = subprocess.run(["unshare", "-n", "--", "sh", str(script)],
                            env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                            timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"built {tmp_path}/opt/venvs/" in result.stdout
    assert "edgebox: installing" not in result.stdout, "extra-requirements.txt lists nothing"
    assert edgebox.__version__ in result.stdout.splitlines()[-2]
