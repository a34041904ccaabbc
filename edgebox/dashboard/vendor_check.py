"""The third-party browser files the pages load (uPlot), checked at start.

They are built into ``web/static/vendor/`` by ``scripts/build_web.py`` (``make
web-assets``) and are not in git, so a ``pip install .`` from a checkout that
skipped that step ships a dashboard whose charts silently draw nothing. The
daemon says so loudly, once, at start, naming the fix."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("edgebox.dashboard")

VENDOR_FILES = ("uPlot.iife.min.js", "uPlot.min.css")
"""What the pages load from ``/static/vendor/`` (scripts/build_web.py's VENDORED)."""


def missing_vendor_files(web_root: Path) -> list[str]:
    vendor = web_root / "static" / "vendor"
    return [name for name in VENDOR_FILES if not (vendor / name).is_file()]


def warn_if_vendor_missing(web_root: Path) -> bool:
    """Log an error when a vendored file is missing; whether all are there."""
    missing = missing_vendor_files(web_root)
    if missing:
        log.error(
            "Dashboard: %s missing from %s: the charts will not draw. Build them with "
            "`make web-assets` (or `python scripts/build_web.py`) before installing",
            ", ".join(missing),
            web_root / "static" / "vendor",
        )
    return not missing
