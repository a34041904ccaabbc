"""A TensorRT model instance as the scheduler sees it.

``execute`` is called on whatever thread the scheduler uses (an HTTP thread, a
batcher worker); it only prepares numpy arrays, hands them to the instance's
``CudaWorker`` and waits, so it never touches CUDA itself. A dynamic batch
(several requests, same shapes apart from the batch dimension) runs as one
engine execution on the inputs concatenated; when the merged batch fits no
optimization profile of the instance, its requests run one by one instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from edgebox.backends.stacked_batch import split_rows, stack_inputs, stackable
from edgebox.backends.tensorrt.cuda_worker import CudaWorker
from edgebox.backends.tensorrt.execution import EngineExecution, NoProfileFits
from edgebox.errors import EdgeboxError, one_line
from edgebox.tensors import InferRequest, InferResponse, Tensor

log = logging.getLogger(__name__)


class TensorRTInstance:
    def __init__(
        self,
        where: str,
        model_name: str,
        version: int,
        worker: CudaWorker,
        execution: EngineExecution,
        output_datatypes: dict[str, str],
        max_batch_size: int,
        state_datatypes: dict[str, str] | None = None,
    ) -> None:
        """``output_datatypes``: the config's outputs, what a request that names
        none gets; ``state_datatypes``: the implicit-state outputs, returned
        only when the sequence batcher asks for them by name."""
        self._where = where
        self._model_name = model_name
        self._version = str(version)
        self._worker = worker
        self._execution = execution
        self._datatypes = {**(state_datatypes or {}), **output_datatypes}
        self._output_names = list(output_datatypes)
        self._max_batch_size = max_batch_size

    @property
    def worker(self) -> CudaWorker:
        return self._worker

    def execute(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        if len(requests) > 1 and self._max_batch_size > 0 and stackable(requests):
            return self._run_batch(requests)
        return [self._run_one(request) for request in requests]

    def close(self) -> None:
        """Free the engine's GPU memory and end the CUDA thread (which pops and
        detaches its context); called once, after the last execute."""
        self._worker.close(teardown=self._execution.release)

    def _run_one(self, request: InferRequest) -> InferResponse | EdgeboxError:
        wanted = self._wanted([request])
        feeds = {t.name: t.data for t in request.inputs}
        try:
            results = self._worker.call(self._execution.run, feeds, wanted)
        except EdgeboxError as exc:
            return EdgeboxError(f"{self._where}: {exc}", exc.code)
        except Exception as exc:
            log.exception("%s: TensorRT execution raised", self._where)
            return EdgeboxError(f"{self._where}: TensorRT execution failed: {one_line(exc)}")
        return self._response(request, results)

    def _run_batch(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        feeds = stack_inputs(requests)
        wanted = self._wanted(requests)
        try:
            merged = self._worker.call(self._execution.run, feeds, wanted)
        except NoProfileFits:
            return [self._run_one(request) for request in requests]
        except EdgeboxError as exc:
            return [EdgeboxError(f"{self._where}: {exc}", exc.code)] * len(requests)
        except Exception as exc:
            log.exception("%s: TensorRT execution raised", self._where)
            error = EdgeboxError(f"{self._where}: TensorRT execution failed: {one_line(exc)}")
            return [error] * len(requests)
        try:
            rows = split_rows(self._where, merged, requests)
        except EdgeboxError as error:
            return [error] * len(requests)
        return [self._response(r, own) for r, own in zip(requests, rows, strict=True)]

    def _wanted(self, requests: Sequence[InferRequest]) -> list[str]:
        asked: set[str] = set()
        for request in requests:
            asked.update(o.name for o in request.outputs)
        if not asked or any(not request.outputs for request in requests):
            return list(self._output_names)
        named = [name for name in self._output_names if name in asked]
        return named + sorted(n for n in asked if n in self._datatypes and n not in named)

    def _response(self, request: InferRequest, results: dict[str, np.ndarray]) -> InferResponse:
        names = [o.name for o in request.outputs] or self._output_names
        outputs = [Tensor(name, self._datatypes[name], results[name]) for name in names]
        return InferResponse(self._model_name, self._version, outputs, id=request.id)
