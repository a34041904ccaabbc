"""Custom-op libraries (``model_operations { op_library_filename }``),
registered on the options of every session the model opens, as Triton's
onnxruntime backend does, so a model whose graph uses an op outside
ONNX's domains (``ai.onnx.contrib`` from onnxruntime-extensions, say) loads.

Registering a library opens it, which runs its code in the daemon: only a
library inside the model folder after symlinks is opened
(``repository/op_libraries.py``), so a config or a client's load override
cannot make the daemon run a file from anywhere on disk. Several models may
each ship a copy.

edgebox opens each library once itself and never closes it, so it stays
loaded for the life of the process, as Triton's custom ops do: ONNX Runtime
would close it with the last session that registered it, and a library
opened again after that (the model loaded again) may crash the process
(onnxruntime-extensions' does when its Python module is imported too). A
library is known by its resolved path: new code needs a new file name.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from edgebox.backends import base
from edgebox.errors import InvalidArgument, Unavailable, one_line
from edgebox.repository.op_libraries import named_op_libraries, resolve_op_libraries

LIBRARY_LABEL = "custom op library"

_kept: dict[str, ctypes.CDLL] = {}
"""Every library opened, by resolved path: handles are kept, never closed."""
_kept_lock = threading.Lock()


def register_custom_ops(options: Any, context: base.ModelContext) -> None:
    """Register each library the config names on ``options``, in order.
    InvalidArgument for a library outside the model folder, Unavailable for
    one that is missing or that ONNX Runtime cannot load; each message names
    the config line and field that asked for the library."""
    try:
        libraries = resolve_op_libraries(
            context.model_dir, named_op_libraries(context.config), LIBRARY_LABEL
        )
    except InvalidArgument as exc:
        raise InvalidArgument(f"{context.where}: {exc}") from None
    for library in libraries:
        if not library.path.is_file():
            raise Unavailable(
                f"{context.where}: {LIBRARY_LABEL} '{library.path}' not found ({library.origin})"
            )
        # The resolved path, so no symlink swapped in after the check is followed.
        real_path = os.path.realpath(library.path)
        try:
            _keep_open(real_path)
            options.register_custom_ops_library(real_path)
        except Exception as exc:
            raise Unavailable(
                f"{context.where}: cannot load {LIBRARY_LABEL} '{library.path}' "
                f"({library.origin}): {one_line(exc)}"
            ) from None


def _keep_open(path: str) -> None:
    with _kept_lock:
        if path not in _kept:
            _kept[path] = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
