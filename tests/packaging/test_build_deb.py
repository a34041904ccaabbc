"""Builds the .deb with scripts/build_deb.sh and looks inside it.

Opt-in (it runs dpkg-buildpackage, about 10 s): EDGEBOX_BUILD_DEB=1, on a
machine with dpkg-dev, debhelper, git, python3-pip, python3-setuptools and
python3-wheel installed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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
]


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("deb")
    result = subprocess.run(
        [str(ROOT / "scripts" / "build_deb.sh"), "--out", str(out)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (path,) = out.glob("edgebox_*_all.deb")
    return path


def dpkg_deb(*args: str) -> str:
    return subprocess.run(
        ["dpkg-deb", *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def test_package_metadata(deb):
    assert dpkg_deb("-f", str(deb), "Package").strip() == "edgebox"
    assert dpkg_deb("-f", str(deb), "Architecture").strip() == "all"
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


def test_packaged_unit_is_the_repository_unit(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True, timeout=30)
    (unit,) = tmp_path.glob("**/systemd/system/edgebox.service")
    assert unit.read_bytes() == (ROOT / "systemd" / "edgebox.service").read_bytes()
    (wheel,) = tmp_path.glob("usr/share/edgebox/wheels/*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"edgebox/daemon.py", "edgebox/cli.py"} <= names
    assert not any(name.startswith(("tests/", "model_repository/")) for name in names)
