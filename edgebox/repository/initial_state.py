"""The first input-state value of a sequence, for one implicit state of
``sequence_batching.state``.

A sequence's first request gets, for each state, its ``initial_state``:
``zero_data`` gives zeros, ``data_file`` the bytes of
``<model>/initial_state/<data_file>`` read row-major as the state's datatype
(TYPE_STRING files use Triton's length-prefixed layout). A state without
``initial_state`` starts as zeros of its dims with every variable dim taken
as 1: Triton leaves that tensor uninitialized, and zeros are edgebox's
deterministic choice. The value has the state's dims, with a leading batch
dim of 1 when the model batches (``max_batch_size`` > 0).

The file name is hostile input like every name a config gives: it must stay
inside the model's ``initial_state`` folder by name and inside the model
folder after symlinks (``contained_path.py``), and it is read only when it is
a regular file of exactly the size the dims need (BYTES: at most
``tensor_file.MAX_BYTES_FILE``). Values are computed once when a version loads and then
shared by every sequence, so they are returned read-only.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/implicit_state_management.md
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.errors import InvalidArgument
from edgebox.repository.contained_path import path_problem, resolve_inside
from edgebox.repository.tensor_file import read_tensor_file, zeros
from edgebox.tensors import config_type_to_datatype

INITIAL_STATE_FOLDER = "initial_state"
"""Where ``data_file`` files live, inside the model folder."""
INITIAL_STATE_FOLDER_LABEL = "the model's initial_state folder"


def initial_state_value(state, model_dir: Path, batched: bool, where: str) -> np.ndarray:
    """The first input-state value of a sequence for ``state`` (a
    ``ModelSequenceBatching.State``), read-only.

    Called on the loading thread. ``where`` names the model (and version);
    messages add the state and the file. Raises InvalidArgument for a file
    name outside the folder, a file that is not a regular file or whose size
    does not match dims x element size, or dims that are not fixed; Unavailable
    when the file is missing or unreadable.
    """
    label = f"{where}, state '{state.input_name}'"
    lead = [1] if batched else []
    if not state.initial_state:
        datatype = _datatype(state.data_type, label)
        return _read_only(zeros(datatype, lead + [1 if d == -1 else d for d in state.dims]))
    initial = state.initial_state[0]
    datatype = _datatype(initial.data_type, label)
    dims = list(initial.dims)
    if any(d < 1 for d in dims):
        raise InvalidArgument(f"{label}: initial_state dims must each be >= 1, got {dims}")
    shape = lead + dims
    if initial.WhichOneof("state_data") == "data_file":
        return _read_only(_from_file(model_dir, initial.data_file, datatype, shape, label))
    return _read_only(zeros(datatype, shape))


def _datatype(config_type: int, label: str) -> str:
    if config_type == model_config_pb2.TYPE_INVALID:
        raise InvalidArgument(f"{label}: data_type is not set")
    return config_type_to_datatype(model_config_pb2.DataType.Name(config_type))


def _from_file(
    model_dir: Path, filename: str, datatype: str, shape: list[int], label: str
) -> np.ndarray:
    """``<model>/initial_state/<filename>``: by name inside the initial_state
    folder, after symlinks inside the model folder; its size is checked
    before anything is read, so neither ``/dev/zero`` nor a huge file is."""
    problem = path_problem("initial_state data_file", filename, INITIAL_STATE_FOLDER_LABEL)
    if problem is not None:
        raise InvalidArgument(f"{label}: {problem}")
    path = resolve_inside(
        model_dir, filename, "initial_state data_file", label, start=INITIAL_STATE_FOLDER
    )
    return read_tensor_file(
        path,
        datatype,
        shape,
        label,
        invalid=InvalidArgument,
        missing=f"initial_state data_file '{path}' not found",
    )


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def initial_state_values(config, model_dir: Path, where: str) -> list[np.ndarray]:
    """Every ``sequence_batching.state`` entry's first value, in config order:
    what the sequence batcher is built with."""
    batched = config.max_batch_size > 0
    return [
        initial_state_value(state, model_dir, batched, where)
        for state in config.sequence_batching.state
    ]
