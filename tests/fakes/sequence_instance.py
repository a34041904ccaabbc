"""A fake stateful backend instance for sequence batcher tests: it records
every batch, computes from the control and state inputs the batcher adds, and
can be held inside ``execute`` until the test releases it.

Per request: ``OUTPUT = INPUT + START`` (Triton's ``simple_sequence``
example), plus ``END * CORRID`` when the request carries CORRID. With an
``INPUT_STATE`` input it is an accumulator: ``OUTPUT_STATE = INPUT`` on
START, ``INPUT_STATE + INPUT`` otherwise, and ``ACC = OUTPUT_STATE``.
"""

from __future__ import annotations

import numpy as np

from edgebox.tensors import InferRequest, InferResponse, Tensor
from fakes.gated_instance import FakeGatedInstance


class FakeSequenceInstance(FakeGatedInstance):
    def __init__(self, hold_first: bool = False) -> None:
        super().__init__(hold_first=hold_first)

    def answer(self, request: InferRequest) -> InferResponse:
        x = request.input("INPUT").data.astype(np.int64)
        start = request.input("START").data.astype(np.int64)
        out = x + start
        corrid, end = request.input("CORRID"), request.input("END")
        if corrid is not None and end is not None and corrid.datatype != "BYTES":
            out = out + end.data.astype(np.int64) * corrid.data.astype(np.int64)
        outputs = [Tensor("OUTPUT", "INT32", out.astype(np.int32))]
        state = request.input("INPUT_STATE")
        if state is not None:
            new = np.where(start != 0, x, state.data.astype(np.int64) + x).astype(np.int32)
            outputs += [Tensor("OUTPUT_STATE", "INT32", new), Tensor("ACC", "INT32", new)]
        return InferResponse("m", "1", outputs, id=request.id)
