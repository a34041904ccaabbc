"""The wheel carries the dashboard's pages (setup.cfg ``data_files``), uPlot
included, and the daemon finds them where pip puts them: a device that
installs the wheel needs neither the source tree nor node."""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

from edgebox.dashboard.app import WHEEL_WEB_ROOT, find_web_root

ROOT = Path(__file__).resolve().parents[2]


def data_files() -> dict[Path, set[Path]]:
    """Install folder -> the source files its globs match."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    listed: dict[Path, set[Path]] = {}
    for target, patterns in parser["options.data_files"].items():
        files = set()
        for pattern in patterns.split():
            files |= {path.relative_to(ROOT) for path in ROOT.glob(pattern)}
        listed[Path(target)] = files
    return listed


def test_every_page_and_static_file_is_in_the_wheel():
    listed = data_files()
    shipped = {
        Path("share/edgebox") / path.parent / path.name: path
        for files in listed.values()
        for path in files
    }
    wanted = [
        path.relative_to(ROOT)
        for folder in ("web/templates", "web/static")
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
    ]
    missing = [str(path) for path in wanted if Path("share/edgebox") / path not in shipped]
    assert not missing, f"setup.cfg [options.data_files] leaves out {missing}"
    for target, files in listed.items():
        for path in files:
            assert target == Path("share/edgebox") / path.parent, (target, path)


def test_the_wheel_carries_uplot_built_by_make():
    vendor = data_files()[Path("share/edgebox/web/static/vendor")]
    assert {path.name for path in vendor} >= {"uPlot.iife.min.js", "uPlot.min.css"}, (
        "web/static/vendor has no uPlot: run `make web-assets` (make test does)"
    )


def test_pages_installed_by_the_wheel_are_found(tmp_path):
    assert Path(sys.prefix) / "share" / "edgebox" / "web" == WHEEL_WEB_ROOT
    installed = tmp_path / "share" / "edgebox" / "web"
    (installed / "templates").mkdir(parents=True)
    assert find_web_root((tmp_path / "no-source-tree", installed)) == installed
