"""The wheel carries the dashboard's vendored uPlot (setup.cfg's data_files),
which is built, not tracked. A ``pip install .`` from a checkout builds it
first (``scripts/build_web.py``: npm at the version web/package-lock.json
pins), or stops naming the fix: an install whose charts silently draw nothing
is worse than one that fails. Everything else lives in setup.cfg."""

import importlib.util
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
VENDOR_FILES = ("uPlot.iife.min.js", "uPlot.min.css")
"""edgebox/dashboard/vendor_check.py's list, repeated: this runs before edgebox
is importable."""


def _build_web_assets() -> None:
    web = HERE / "web"
    builder = HERE / "scripts" / "build_web.py"
    if builder.is_file() and (web / "package-lock.json").is_file():
        spec = importlib.util.spec_from_file_location("edgebox_build_web", builder)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            module.build(web)
        except module.WebBuildError as error:
            sys.exit(
                f"edgebox: the dashboard's charts need uPlot in web/static/vendor/.\n{error}\n"
                "Or build them elsewhere with `make web-assets` and copy web/static/vendor/ here."
            )
    missing = [name for name in VENDOR_FILES if not (web / "static" / "vendor" / name).is_file()]
    if missing:
        sys.exit(
            f"edgebox: {', '.join(missing)} missing from {web / 'static' / 'vendor'}: "
            "build them with `make web-assets` (python scripts/build_web.py) first"
        )


_build_web_assets()
setup()
