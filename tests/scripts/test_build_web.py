"""scripts/build_web.py: uPlot's built files land in web/static/vendor/ from
npm's install, copies newer than the lock are kept without asking npm, and a
missing npm is named with the package to install."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scripts.build_web import VENDORED, WebBuildError, build


def fake_web(root: Path, installed: bool) -> Path:
    web = root / "web"
    web.mkdir()
    (web / "package-lock.json").write_text("{}\n")
    if installed:
        for source in VENDORED:
            path = web / "node_modules" / source
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"contents of {source}\n")
        (web / "node_modules" / ".package-lock.json").write_text("{}\n")
    return web


def vendored_copies(web: Path, text: str) -> Path:
    """``web/static/vendor`` holding a copy of every vendored file, reading ``text``."""
    vendor = web / "static" / "vendor"
    vendor.mkdir(parents=True)
    for name in VENDORED.values():
        (vendor / name).write_text(text)
    return vendor


def test_installed_files_are_copied_into_static_vendor(tmp_path):
    web = fake_web(tmp_path, installed=True)
    written = build(web)
    assert sorted(p.name for p in written) == ["uPlot.iife.min.js", "uPlot.min.css"]
    for source, name in VENDORED.items():
        assert (web / "static" / "vendor" / name).read_text() == f"contents of {source}\n"


def test_copies_newer_than_the_lock_are_kept_without_npm(tmp_path, monkeypatch):
    web = fake_web(tmp_path, installed=False)
    vendor = vendored_copies(web, "vendored\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert build(web) == []
    assert (vendor / "uPlot.iife.min.js").read_text() == "vendored\n"


def test_copies_older_than_the_lock_need_npm_and_say_how_to_get_it(tmp_path, monkeypatch):
    web = fake_web(tmp_path, installed=False)
    vendor = vendored_copies(web, "stale\n")
    for name in VENDORED.values():
        os.utime(vendor / name, (0, 0))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(WebBuildError) as error:
        build(web)
    assert str(error.value) == (
        f"build_web: '{vendor}' needs npm to install uPlot from 'package-lock.json'; "
        "install it: sudo apt-get install nodejs npm"
    )
