"""A web root without the vendored uPlot (a ``pip install .`` that skipped
``make web-assets``) is reported at start, naming the files and the fix; the
shipped list matches what scripts/build_web.py vendors."""

from __future__ import annotations

import logging
from pathlib import Path

from edgebox.dashboard.vendor_check import VENDOR_FILES, warn_if_vendor_missing
from scripts.build_web import VENDORED


def test_the_checked_files_are_the_ones_the_build_vendors() -> None:
    assert set(VENDOR_FILES) == set(VENDORED.values())


def test_a_missing_vendored_file_is_an_error_naming_the_fix(tmp_path: Path, caplog) -> None:
    (tmp_path / "static" / "vendor").mkdir(parents=True)
    (tmp_path / "static" / "vendor" / "uPlot.min.css").write_text("")
    with caplog.at_level(logging.ERROR, logger="edgebox.dashboard"):
        assert not warn_if_vendor_missing(tmp_path)
    assert "uPlot.iife.min.js missing" in caplog.text
    assert "make web-assets" in caplog.text


def test_a_complete_web_root_says_nothing(tmp_path: Path, caplog) -> None:
    vendor = tmp_path / "static" / "vendor"
    vendor.mkdir(parents=True)
    for name in VENDOR_FILES:
        (vendor / name).write_text("")
    with caplog.at_level(logging.ERROR, logger="edgebox.dashboard"):
        assert warn_if_vendor_missing(tmp_path)
    assert caplog.text == ""
