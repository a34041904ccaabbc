"""Imports a version's ``model.py`` into the daemon's interpreter, and
takes it out again at unload.

Triton runs each instance in a stub process; edgebox runs it in-process,
which means the model shares ``sys.path`` and ``sys.modules`` with the daemon
and with other python models. So:

* each version's model.py is imported once, under a module name of its own;
* its folder is on ``sys.path`` while the version is loaded, so model.py can
  import sibling modules as it can under Triton;
* sibling modules imported while model.py loads are dropped from
  ``sys.modules`` right after, so two models that each ship a ``utils.py`` get
  their own (a sibling imported lazily inside ``execute`` is found through
  ``sys.path`` and may resolve to another loaded model's file of that name);
* ``triton_python_backend_utils`` is edgebox's own module, registered under
  that name before any model is imported.

A failure in the model's own code is the load's reason, naming the file and
line the author will look at (``describe_exception``); its traceback goes to
the log.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import re
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from edgebox.backends.base import ModelContext
from edgebox.backends.python import triton_python_backend_utils as pb_utils
from edgebox.errors import Unavailable

PB_UTILS_MODULE_NAME = "triton_python_backend_utils"
MODEL_CLASS_NAME = "TritonPythonModel"

_log = logging.getLogger("edgebox.backends.python")

# sys.path and sys.modules are process-wide; imports of model.py files take
# turns so each sees its own folder first on sys.path and so the sibling
# cleanup only drops modules its own import added.
_import_lock = threading.Lock()
_module_numbers = itertools.count(1)


@dataclass
class ImportedModel:
    """One import of a version's model.py, until ``unimport``."""

    context: ModelContext
    """Held so the id() key the backend files it under cannot be reused."""
    module: ModuleType
    model_class: type
    path_entry: str


def import_model(context: ModelContext, path: Path) -> ImportedModel:
    """Import ``path`` as the version's model module, once per call: a reload
    gets a module of its own. Unavailable, naming the file, when it cannot be
    imported or defines no ``TritonPythonModel`` with an ``execute``; nothing
    of a failed import stays on ``sys.path`` or in ``sys.modules``."""
    where = context.where
    version_dir = Path(context.version_dir)
    path_entry = str(version_dir)
    safe_name = re.sub(r"\W", "_", context.name)
    module_name = f"edgebox_model_{safe_name}_v{context.version}_{next(_module_numbers)}"
    sys.modules[PB_UTILS_MODULE_NAME] = pb_utils
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise Unavailable(f"{where}: cannot import '{path}': not a Python source file")
    with _import_lock:
        sys.path.insert(0, path_entry)
        before = set(sys.modules)
        # Compiled files would land in the model repository, which may be
        # read-only and whose changes the repository poller watches.
        dont_write_bytecode = sys.dont_write_bytecode
        sys.dont_write_bytecode = True
        try:
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        except BaseException as exc:
            sys.modules.pop(module_name, None)
            sys.path.remove(path_entry)
            raise load_failure(
                f"{where}: cannot import '{path}': {describe_exception(exc, version_dir)}", exc
            ) from None
        finally:
            sys.dont_write_bytecode = dont_write_bytecode
            _forget_modules_under(path_entry, keep={module_name}, only=set(sys.modules) - before)
    model_class = getattr(module, MODEL_CLASS_NAME, None)
    if not isinstance(model_class, type):
        with _import_lock:
            sys.modules.pop(module_name, None)
            sys.path.remove(path_entry)
        raise Unavailable(f"{where}: '{path}' defines no class '{MODEL_CLASS_NAME}'")
    if not callable(getattr(model_class, "execute", None)):
        with _import_lock:
            sys.modules.pop(module_name, None)
            sys.path.remove(path_entry)
        raise Unavailable(f"{where}: '{path}': class '{MODEL_CLASS_NAME}' has no execute() method")
    return ImportedModel(context, module, model_class, path_entry)


def unimport(imported: ImportedModel, keep: set[str] | None = None) -> None:
    """Take ``imported`` out of ``sys.modules`` and its folder off ``sys.path``.
    With ``keep`` (the module names of the versions still loaded, which may
    share the folder during a reload), the sibling modules imported from the
    folder since go too."""
    with _import_lock:
        sys.modules.pop(imported.module.__name__, None)
        if keep is not None:
            _forget_modules_under(imported.path_entry, keep=keep)
        if imported.path_entry in sys.path:
            sys.path.remove(imported.path_entry)


def load_failure(message: str, exc: BaseException) -> Unavailable:
    """The load error for a failure in the model's own code; the traceback
    goes to the log, the message to the model's state reason."""
    _log.error("%s", message, exc_info=exc)
    return Unavailable(message)


def _forget_modules_under(folder: str, keep: set[str], only: set[str] | None = None) -> None:
    """Drop modules whose file lies in ``folder`` from sys.modules; the model
    code that imported them keeps its references. Callers hold ``_import_lock``."""
    prefix = os.path.join(os.path.abspath(folder), "")
    names = list(sys.modules) if only is None else list(only)
    for name in names:
        if name in keep:
            continue
        module = sys.modules.get(name)
        filename = getattr(module, "__file__", None)
        if filename and os.path.abspath(filename).startswith(prefix):
            del sys.modules[name]


def describe_exception(exc: BaseException, version_dir: Path) -> str:
    """``ZeroDivisionError: division by zero (model.py line 12)``: the type,
    the message, and the deepest line of the model's own files it passed
    through, which is where its author will look."""
    if isinstance(exc, SyntaxError):
        text = f"{type(exc).__name__}: {exc.msg}"
        location = _location(exc.filename, exc.lineno, version_dir)
    else:
        detail = str(exc)
        text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        location = None
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if _is_under(frame.filename, version_dir):
                location = _location(frame.filename, frame.lineno, version_dir)
                break
    return f"{text} ({location})" if location else text


def _is_under(filename: str | None, folder: Path) -> bool:
    if not filename:
        return False
    prefix = os.path.join(os.path.abspath(folder), "")
    return os.path.abspath(filename).startswith(prefix)


def _location(filename: str | None, lineno: int | None, version_dir: Path) -> str | None:
    if not filename:
        return None
    if _is_under(filename, version_dir):
        shown = os.path.relpath(os.path.abspath(filename), os.path.abspath(version_dir))
    else:
        shown = filename
    return f"{shown} line {lineno}" if lineno else shown
