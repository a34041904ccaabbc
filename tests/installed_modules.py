"""``installed``: a module only when it is really installed, for the tests
that run where the hardware is (TensorRT, pycuda) and skip elsewhere."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType


def installed(name: str) -> ModuleType | None:
    """The module, imported, when it is really installed. Under pytest, test
    folders are on sys.path, and a folder named ``tensorrt`` there would import
    as an empty namespace package (a spec without an origin): that is left
    alone rather than put into sys.modules."""
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:
        return None
    if spec is None or spec.origin is None:
        return None
    return importlib.import_module(name)
