"""The tensors ``sequence_batching`` adds to a model beside config.input and
config.output: control inputs and implicit-state inputs and outputs.

The sequence batcher feeds a model these inputs and asks it for the state
outputs by name, though the config's ``input``/``output`` never list them, so
each backend that checks a config against its model file reads them from here
and holds them to the model as it holds declared tensors. Pure functions of the
config; callers own the wording of their own refusals.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#sequence-batcher
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2

_CORRID = model_config_pb2.ModelSequenceBatching.Control.CONTROL_SEQUENCE_CORRID


@dataclass(frozen=True)
class SequenceTensor:
    """One tensor the sequence batcher adds. ``dims`` excludes the batch
    dimension; a control is always ``[1]``. ``origin`` says where the config
    names it, for messages: "sequence control 'START'", "state 'INPUT_STATE'"."""

    name: str
    config_type: str
    dims: tuple[int, ...]
    origin: str
    is_control: bool = False


def control_config_type(control) -> str:
    """The datatype a control tensor is fed with, as Triton picks it: from which
    ``*_false_true`` list is set, or ``data_type`` for CORRID."""
    if control.kind == _CORRID:
        return model_config_pb2.DataType.Name(control.data_type)
    if len(control.fp32_false_true):
        return "TYPE_FP32"
    if len(control.bool_false_true):
        return "TYPE_BOOL"
    return "TYPE_INT32"


def sequence_inputs(config) -> list[SequenceTensor]:
    """The control inputs, then the state inputs, in config order; empty
    without ``sequence_batching``."""
    if not config.HasField("sequence_batching"):
        return []
    batching = config.sequence_batching
    tensors = []
    for control_input in batching.control_input:
        for control in control_input.control[:1]:
            tensors.append(
                SequenceTensor(
                    control_input.name,
                    control_config_type(control),
                    (1,),
                    f"sequence control '{control_input.name}'",
                    is_control=True,
                )
            )
    for state in batching.state:
        tensors.append(
            SequenceTensor(
                state.input_name,
                model_config_pb2.DataType.Name(state.data_type),
                tuple(state.dims),
                f"state input '{state.input_name}'",
            )
        )
    return tensors


def state_outputs(config) -> list[SequenceTensor]:
    """The state outputs (``state[].output_name``); empty without sequence batching."""
    if not config.HasField("sequence_batching"):
        return []
    return [
        SequenceTensor(
            state.output_name,
            model_config_pb2.DataType.Name(state.data_type),
            tuple(state.dims),
            f"state output '{state.output_name}'",
        )
        for state in config.sequence_batching.state
    ]
