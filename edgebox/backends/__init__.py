"""backends/ turns a model version's files into instances that execute
requests, one package per platform (``onnxruntime/``, ``python/``,
``tensorrt/``), each exposing a ``Backend`` with the shape ``base.py`` gives;
what two platforms share sits beside them (``stacked_batch``, ``sequence_io``).

Invariant: a backend knows one version at a time and nothing above it. It
imports only the foundation and ``repository/`` (config and path rules), never
scheduling, lifecycle, the dataplane or a transport; it reaches other models
only through the ``infer`` functions its ``ModelContext`` hands it (BLS). A
heavy runtime (onnxruntime, tensorrt) is imported when a model of its own
loads, so a missing runtime makes only those models UNAVAILABLE.
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
    """Creates each backend once, on first use. Thread-safe.

    ``python_isolation`` and ``python_memory_limit_mb`` are the daemon's
    defaults for python models whose config does not choose (settings of the
    same names; see ``python/isolation.py``)."""

    def __init__(
        self, python_isolation: str = "in_process", python_memory_limit_mb: int = 2048
    ) -> None:
        self._backends: dict[str, Backend] = {}
        self._lock = threading.Lock()
        self._python_isolation = python_isolation
        self._python_memory_limit_mb = python_memory_limit_mb

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
                backend = importlib.import_module(module_name).Backend(*self._arguments(name))
                self._backends[name] = backend
            return backend

    def _arguments(self, name: str) -> tuple:
        if name != "python":
            return ()
        from edgebox.backends.python.isolation import IsolationOptions

        return (IsolationOptions(self._python_isolation, self._python_memory_limit_mb),)
