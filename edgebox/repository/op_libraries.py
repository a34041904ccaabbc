"""Shared libraries a model config asks its backend to load: Triton's
``model_operations { op_library_filename: "..." }`` (repeatable), which the
TensorRT backend reads as plugin libraries and the ONNX Runtime backend as
custom-op libraries.

Loading a library runs its code in the daemon, so a name is held to the
model-folder rule (``contained_path.py``) twice, like every named file:
``op_library_problems`` is the lexical check made when the config is parsed
(``path:line:col`` for a name that leads out), ``resolve_op_libraries`` the
check made where the library is opened, which follows symlinks. Nothing here
opens a library; each backend does, in its own way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from edgebox.repository.config_locator import Problem
from edgebox.repository.contained_path import path_problem, resolve_inside

OP_LIBRARY_FIELD = "model_operations.op_library_filename"

_LOADING_PLATFORMS = {"tensorrt_plan", "onnxruntime_onnx"}
_LOADING_BACKENDS = {"tensorrt", "onnxruntime"}


@dataclass(frozen=True)
class OpLibrary:
    path: Path
    """Inside the model folder, spelled as the config spells it."""
    origin: str
    """Where the config names it: ``<config.pbtxt>:<line>: <field>``."""


def loads_op_libraries(config) -> bool:
    """Whether this model's backend acts on ``model_operations``; the other
    backends edgebox knows of leave it unread."""
    return config.platform in _LOADING_PLATFORMS or config.backend in _LOADING_BACKENDS


def op_library_problems(config) -> Iterator[Problem]:
    if not loads_op_libraries(config):
        return
    for name in config.model_operations.op_library_filename:
        problem = path_problem(OP_LIBRARY_FIELD, name)
        if problem is not None:
            yield OP_LIBRARY_FIELD, problem


def named_op_libraries(config) -> list[tuple[str, str]]:
    """(name, field) for each ``model_operations`` library, in config order."""
    return [(name, OP_LIBRARY_FIELD) for name in config.model_operations.op_library_filename]


def resolve_op_libraries(
    model_dir: Path, named: Iterable[tuple[str, str]], label: str
) -> list[OpLibrary]:
    """Each (name, field) as a library inside ``model_dir``, in order;
    InvalidArgument, ``<config>:<line>: <field>: <label> '<name>' is outside
    the model folder``, for the first that is not. ``label`` is what the
    backend calls the library (``plugin library``, ``custom op library``)."""
    config_path = model_dir / "config.pbtxt"
    try:
        text = config_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    libraries = []
    for name, field in named:
        line = _line_of(text, name)
        where = f"{config_path}:{line}" if line else str(config_path)
        origin = f"{where}: {field}"
        libraries.append(OpLibrary(resolve_inside(model_dir, name, label, origin), origin))
    return libraries


def _line_of(text: str, value: str) -> int | None:
    """The first line of the config that mentions ``value``; None when the
    config came from elsewhere (a client's load override)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if value in line:
            return number
    return None
