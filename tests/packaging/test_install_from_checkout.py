"""``pip install .`` from a checkout, as the README's by-hand install does:
with uPlot built the installed daemon serves pages whose charts load it; with
neither uPlot nor npm the install stops and names the fix, instead of
shipping a dashboard whose charts silently draw nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path

import pytest

from daemon_process import DaemonProcess

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "web" / "static" / "vendor"


def _checkout_copy(target: Path) -> Path:
    """The files a clean clone of this working tree has (tracked, or new and
    not ignored): no web/static/vendor, no node_modules, no venv."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in listed)):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    assert not (target / "web" / "static" / "vendor").exists()
    return target


def _build_wheel(source: Path, out: Path, path_dirs: list[str]) -> subprocess.CompletedProcess:
    """Offline, with this venv's setuptools, and only ``path_dirs`` on PATH
    (so npm is there or not as the test wants)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": os.pathsep.join(path_dirs), "PIP_NO_INPUT": "1"},
        timeout=300,
        check=False,
    )


def test_without_uplot_or_npm_the_install_stops_naming_the_fix(tmp_path):
    source = _checkout_copy(tmp_path / "checkout")
    result = _build_wheel(source, tmp_path / "wheels", [str(Path(sys.executable).parent)])
    assert result.returncode != 0
    assert "the dashboard's charts need uPlot" in result.stderr + result.stdout
    assert "needs npm to install uPlot" in result.stderr + result.stdout
    assert not list((tmp_path / "wheels").glob("*.whl"))


@pytest.mark.skipif(not (VENDOR / "uPlot.iife.min.js").is_file(), reason="make web-assets first")
def test_the_installed_daemon_serves_pages_that_load_uplot(tmp_path):
    source = _checkout_copy(tmp_path / "checkout")
    shutil.copytree(VENDOR, source / "web" / "static" / "vendor")
    built = _build_wheel(source, tmp_path / "wheels", [str(Path(sys.executable).parent)])
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("edgebox-*.whl")

    venv = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies come from this venv, after the installed copy; a path
    # line in a .pth does not run this venv's own .pth files (the editable
    # checkout stays out).
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    where = subprocess.run(
        [python, "-c", "import edgebox; print(edgebox.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(venv), where

    repository = tmp_path / "models"
    repository.mkdir()
    daemon = DaemonProcess(
        repository, tmp_path / "daemon.log", [], python=str(python), cwd=tmp_path
    )
    with daemon.start():
        page = urllib.request.urlopen(f"{daemon.dashboard_url}/login", timeout=10).read()
        assert b"/static/vendor/uPlot.min.css" in page
        for name in ("uPlot.iife.min.js", "uPlot.min.css"):
            served = urllib.request.urlopen(
                f"{daemon.dashboard_url}/static/vendor/{name}", timeout=10
            ).read()
            assert served == (VENDOR / name).read_bytes()
        assert "missing from" not in daemon.log()
