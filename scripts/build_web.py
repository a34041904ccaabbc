"""Puts the dashboard's third-party browser files into ``web/static/vendor/``.

uPlot comes from the npm registry at the version ``web/package-lock.json``
pins: ``npm ci`` installs it into ``web/node_modules/`` (only when that copy is
missing or older than the lock), then its built files are copied next to our
own static files. The copies are git-ignored but ship in the .deb, so the
device itself never needs node. Copies newer than the lock are left alone
without asking npm, so a machine that only runs the daemon (or a clean copy
that carries them) can still build and test.

    python scripts/build_web.py            # uses ./web
    python scripts/build_web.py --web DIR
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VENDORED: dict[str, str] = {
    "uplot/dist/uPlot.iife.min.js": "uPlot.iife.min.js",
    "uplot/dist/uPlot.min.css": "uPlot.min.css",
}
"""Files under ``node_modules/`` -> their name under ``static/vendor/``."""


class WebBuildError(RuntimeError):
    """The vendored files cannot be produced; the message says what to install."""


def _install_is_current(web: Path) -> bool:
    lock = web / "package-lock.json"
    marker = web / "node_modules" / ".package-lock.json"
    sources = [web / "node_modules" / source for source in VENDORED]
    if not marker.exists() or not all(source.exists() for source in sources):
        return False
    return marker.stat().st_mtime >= lock.stat().st_mtime


def _vendored_are_current(web: Path) -> bool:
    vendor = web / "static" / "vendor"
    targets = [vendor / name for name in VENDORED.values()]
    if not all(target.exists() for target in targets):
        return False
    oldest = min(target.stat().st_mtime for target in targets)
    return oldest >= (web / "package-lock.json").stat().st_mtime


def build(web: Path) -> list[Path]:
    """Install (when needed) and copy the vendored files; returns the files written.

    Raises ``WebBuildError`` when npm is needed but missing or fails."""
    if _vendored_are_current(web):
        return []
    if not _install_is_current(web):
        npm = shutil.which("npm")
        if npm is None:
            raise WebBuildError(
                f"build_web: '{web / 'static' / 'vendor'}' needs npm to install uPlot from "
                "'package-lock.json'; install it: sudo apt-get install nodejs npm"
            )
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=web,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise WebBuildError(
                f"build_web: 'npm ci' in '{web}' failed with exit code {result.returncode}:\n"
                f"{result.stderr.strip()}"
            )
    vendor = web / "static" / "vendor"
    vendor.mkdir(parents=True, exist_ok=True)
    written = []
    for source, name in VENDORED.items():
        target = vendor / name
        origin = web / "node_modules" / source
        changed = not target.exists() or target.read_bytes() != origin.read_bytes()
        shutil.copyfile(origin, target)
        if changed:
            written.append(target)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--web", type=Path, default=ROOT / "web", help="the web/ folder")
    args = parser.parse_args(argv)
    try:
        written = build(args.web)
    except WebBuildError as error:
        print(error, file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
