"""Which input of a model a stream's frames go to, found from the model's
metadata, so any model that takes one BGR frame can be run on a stream."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgebox.dataplane import DataPlane
from edgebox.errors import EdgeboxError
from edgebox.summaries import DEFAULT_RULE, rule_of
from edgebox.tensors import InferRequest, Tensor

FRAME_DATATYPE = "UINT8"
FRAME_SHAPE = "[-1,-1,3]"


class ModelUnusable(Exception):
    """The stream's model cannot take frames right now: unknown, not ready, or
    its signature is not one frame. The message is shown as the stream's
    reason; the stream keeps looking, since a hot reload can fix any of them."""


@dataclass(frozen=True)
class FrameInput:
    model: str
    input_name: str
    summary_rule: str = DEFAULT_RULE
    """How the model's config says its results are summarised."""

    def request(self, frame: np.ndarray) -> InferRequest:
        """A request for the current version of the model, every output."""
        return InferRequest(self.model, [Tensor(self.input_name, FRAME_DATATYPE, frame)])


def bind_frame_input(dataplane: DataPlane, model: str) -> FrameInput:
    """The model's frame input; raises ModelUnusable saying why there is none.

    Accepted: exactly one input, UINT8, rank 3 with 3 (or -1) channels last.
    Height and width may be fixed, in which case frames of another size fail
    one by one with the dataplane's shape message.
    """
    try:
        metadata = dataplane.model_metadata(model)
    except EdgeboxError as exc:
        raise ModelUnusable(str(exc)) from None
    inputs = metadata.inputs
    if len(inputs) == 1:
        (only,) = inputs
        shape = only.shape
        if only.datatype == FRAME_DATATYPE and len(shape) == 3 and shape[2] in (3, -1):
            try:
                rule = rule_of(dataplane.model_config(model))
            except EdgeboxError as exc:
                raise ModelUnusable(str(exc)) from None
            return FrameInput(model, only.name, rule)
    got = ", ".join(
        f"'{i.name}' {i.datatype} [{','.join(str(d) for d in i.shape)}]" for i in inputs
    )
    raise ModelUnusable(
        f"model '{model}' does not take frames: expected one input of datatype "
        f"{FRAME_DATATYPE} and shape {FRAME_SHAPE}, got {got or 'no inputs'}"
    )
