"""Custom-layer (plugin) libraries, loaded before the engine that needs them.

An engine with a custom layer deserializes only if the layer's plugin creator
is registered first. edgebox loads the libraries a config names, then calls
``trt.init_libnvinfer_plugins`` (which also registers TensorRT's own plugins),
then deserializes. A config names libraries in two ways:

- Triton's ``model_operations { op_library_filename: "plugins/libyolo.so" }``
  (repeatable);
- ``parameters { key: "plugins" value { string_value: "a.so,b.so" } }``, a
  comma-separated list.

Paths are relative to the model's folder and must stay inside it after
symlinks (``repository/op_libraries.py``): a config, or a client's load
override, must not make the daemon run code from anywhere on disk. A library
kept elsewhere is loaded through ``LD_PRELOAD`` instead. Libraries are opened with
``RTLD_GLOBAL`` so their symbols are visible to TensorRT, and stay loaded for
the life of the process (a shared library cannot be safely unloaded). Loading a
library through ``LD_PRELOAD`` keeps working: its creators register when the
process starts and ``init_libnvinfer_plugins`` leaves them in place.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from edgebox.errors import Unavailable
from edgebox.repository.backend_parameters import TENSORRT_PLUGINS_PARAMETER
from edgebox.repository.op_libraries import OpLibrary, named_op_libraries, resolve_op_libraries

log = logging.getLogger(__name__)

PLUGINS_PARAMETER = TENSORRT_PLUGINS_PARAMETER

_loaded: dict[str, object] = {}
"""Every library opened, by path: handles are kept, never closed."""
_loaded_lock = threading.Lock()


def plugin_libraries(config, model_dir: Path) -> list[OpLibrary]:
    """The libraries ``config`` asks for, ``model_operations`` first, then the
    ``plugins`` parameter, in the order given; InvalidArgument for one that is
    not inside ``model_dir``."""
    named = named_op_libraries(config)
    if PLUGINS_PARAMETER in config.parameters:
        listed = config.parameters[PLUGINS_PARAMETER].string_value
        named += [
            (name.strip(), f"parameters '{PLUGINS_PARAMETER}'")
            for name in listed.split(",")
            if name.strip()
        ]
    return resolve_op_libraries(model_dir, named, "plugin library")


def load_plugins(
    libraries: Sequence[OpLibrary],
    trt,
    logger,
    open_library: Callable[[str], object] | None = None,
) -> None:
    """Open every library, then register TensorRT's plugin creators; raises
    Unavailable naming the library and the config line that asked for it."""
    opener = open_library or _open_global
    for library in libraries:
        key = str(library.path)
        if not library.path.is_file():
            raise Unavailable(f"plugin library '{library.path}' not found ({library.origin})")
        try:
            handle = opener(key)
        except OSError as exc:
            raise Unavailable(
                f"cannot load plugin library '{library.path}' ({library.origin}): {exc}"
            ) from None
        with _loaded_lock:
            _loaded[key] = handle
        log.info("loaded TensorRT plugin library '%s' (%s)", library.path, library.origin)
    if not trt.init_libnvinfer_plugins(logger, ""):
        log.warning("init_libnvinfer_plugins failed: TensorRT's own plugins may be missing")


def _open_global(path: str) -> object:
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
