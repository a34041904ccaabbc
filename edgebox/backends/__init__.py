"""backends/ turn model files into instances that execute requests.

Each module holds one platform and exposes a ``Backend``; heavy runtimes
(onnxruntime, tensorrt) are imported only when a model of theirs loads, so a
missing runtime makes only its own models UNAVAILABLE. Backends never call back
into the dataplane except through the ``infer`` function a context hands them.
"""

from __future__ import annotations

import importlib
import threading

from edgebox.backends.base import Backend
from edgebox.errors import Unsupported

_MODULES = {
    "onnxruntime": "edgebox.backends.onnxruntime",
    "python": "edgebox.backends.python",
    "tensorrt": "edgebox.backends.tensorrt",
}


class BackendCatalog:
    """Creates each backend once, on first use. Thread-safe."""

    def __init__(self) -> None:
        self._backends: dict[str, Backend] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Backend:
        with self._lock:
            backend = self._backends.get(name)
            if backend is None:
                module_name = _MODULES.get(name)
                if module_name is None:
                    supported = ", ".join(sorted([*_MODULES, "ensemble"]))
                    raise Unsupported(
                        f"backend '{name}' is not supported by edgebox (supported: {supported})"
                    )
                backend = importlib.import_module(module_name).Backend()
                self._backends[name] = backend
            return backend
