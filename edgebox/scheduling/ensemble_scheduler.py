"""Runs an ensemble's steps as a data-flow graph.

A step starts as soon as every tensor it reads exists. The first ready step runs
on the caller's thread; further ready steps (independent branches) run on a
shared bounded pool meanwhile. Intermediate tensors stay numpy arrays passed by
reference: nothing is serialized between steps. Each step goes through the same
``infer`` function as a client request, so it is validated, counted in the
composing model's statistics, and holds that model's version while it runs
(hot reload drains it like any other request). The ensemble's one final
response is sent on the caller's thread once the graph finished.

A tensor that more than one reader sees (two steps, or a step and the
ensemble's outputs) reaches each step as a read-only view, so a model that
writes into its input (as Triton lets it) writes into its own copy (see the
python backend) and never into a sibling's data. Steps inherit the request's
cancellation, and once the client gave up no further step starts (Triton
checks between steps too).

The lifecycle refuses ensembles whose steps reach themselves; as a second line,
ensembles nested more than ``MAX_NESTING`` deep fail the request rather than
recurse without end, and a failed graph cancels its branches not yet started.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/ensemble_models.md
"""

from __future__ import annotations

import concurrent.futures as cf
import contextvars
import time

import numpy as np

from edgebox.backends.base import InferFunction
from edgebox.errors import Cancelled, EdgeboxError, Unavailable
from edgebox.scheduling.direct import finish_response
from edgebox.scheduling.scheduler import SynchronousScheduler
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor

_BRANCH_POOL = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="ensemble-branch")
"""Threads for parallel branches only; a waiting ensemble takes back any branch
not yet started and runs it itself, so nested ensembles cannot starve the pool."""

MAX_NESTING = 16
"""Ensembles inside ensembles, the outermost counted as 1. Deeper means a step
reaches its own ensemble again (a cycle the lifecycle should have refused)."""
_nesting: contextvars.ContextVar[int] = contextvars.ContextVar("ensemble_nesting", default=0)
"""How deep the current thread's request is; branches on the pool carry it
along (each runs in a copy of its submitter's context)."""


class _Step:
    __slots__ = ("index", "inputs", "model_name", "model_version", "outputs")

    def __init__(self, index: int, step) -> None:
        self.index = index
        self.model_name = step.model_name
        self.model_version = str(step.model_version) if step.model_version >= 0 else ""
        self.inputs = dict(step.input_map)
        self.outputs = dict(step.output_map)


class EnsembleScheduler(SynchronousScheduler):
    failure: str | None = None
    """Never set: an ensemble holds no instances of its own."""

    def __init__(self, config, signature: ModelSignature, infer: InferFunction, where: str) -> None:
        self.statistics = ModelStatistics()
        self._name = config.name
        self._signature = signature
        self._infer = infer
        self._where = where
        self._steps = [_Step(i, s) for i, s in enumerate(config.ensemble_scheduling.step)]
        readers = [name for step in self._steps for name in step.inputs.values()]
        readers += list(signature.outputs)
        self._shared = {name for name in readers if readers.count(name) > 1}

    @property
    def composing_models(self) -> list[tuple[str, str]]:
        return [(s.model_name, s.model_version) for s in self._steps]

    def infer(self, request: InferRequest) -> InferResponse:
        start = time.perf_counter_ns()
        depth = _nesting.get() + 1
        if depth > MAX_NESTING:
            self.statistics.record_request(False, time.perf_counter_ns() - start)
            raise Unavailable(
                f"{self._where}: ensembles nested more than {MAX_NESTING} deep "
                "(does a step call the ensemble itself?)"
            )
        token = _nesting.set(depth)
        try:
            tensors = self._run_graph(request)
            outputs = [
                Tensor(name, tensors[name].datatype, tensors[name].data)
                for name in self._signature.outputs
                if name in tensors
            ]
            response = InferResponse(request.model_name, "", outputs)
            response = finish_response(response, request, self._signature, self._where)
        except EdgeboxError:
            self.statistics.record_request(False, time.perf_counter_ns() - start)
            raise
        finally:
            _nesting.reset(token)
        elapsed = time.perf_counter_ns() - start
        batch = (
            request.inputs[0].data.shape[0]
            if self._signature.max_batch_size and request.inputs
            else 1
        )
        self.statistics.record_execution(batch, 1, 0, elapsed, 0)
        self.statistics.record_request(True, elapsed)
        return response

    def close(self) -> None:
        pass

    def _run_graph(self, request: InferRequest) -> dict[str, Tensor]:
        tensors: dict[str, Tensor] = {t.name: t for t in request.inputs}
        pending = list(self._steps)
        running: dict[cf.Future, _Step] = {}
        try:
            self._run_ready_steps(request, tensors, pending, running)
        except BaseException:
            for future in running:
                future.cancel()
            raise
        return tensors

    def _run_ready_steps(
        self,
        request: InferRequest,
        tensors: dict[str, Tensor],
        pending: list[_Step],
        running: dict[cf.Future, _Step],
    ) -> None:
        while pending or running:
            ready = [s for s in pending if all(t in tensors for t in s.inputs.values())]
            for step in ready:
                pending.remove(step)
            if not ready and not running:
                names = ", ".join(f"'{s.model_name}'" for s in pending)
                raise EdgeboxError(f"{self._where}: steps {names} can never run: inputs missing")
            for step in ready[1:]:
                context = contextvars.copy_context()
                future = _BRANCH_POOL.submit(context.run, self._run_step, step, tensors, request)
                running[future] = step
            if ready:
                tensors.update(self._run_step(ready[0], tensors, request))
            else:
                self._wait_for_branch(running, tensors, request)
            for future in [f for f in running if f.done()]:
                running.pop(future)
                tensors.update(future.result())

    def _wait_for_branch(self, running: dict, tensors: dict, request: InferRequest) -> None:
        for future, step in list(running.items()):
            if future.cancel():
                running.pop(future)
                tensors.update(self._run_step(step, tensors, request))
                return
        cf.wait(list(running), return_when=cf.FIRST_COMPLETED)

    def _run_step(
        self, step: _Step, tensors: dict[str, Tensor], request: InferRequest
    ) -> dict[str, Tensor]:
        if request.cancelled():
            raise Cancelled(
                f"{self._where}: request cancelled before step '{step.model_name}': "
                "its client gave up; the remaining steps were not run"
            )
        step_request = InferRequest(
            model_name=step.model_name,
            model_version=step.model_version,
            id=request.id,
            inputs=[
                Tensor(
                    model_input,
                    tensors[name].datatype,
                    _read_only(tensors[name].data) if name in self._shared else tensors[name].data,
                )
                for model_input, name in step.inputs.items()
            ],
            outputs=[RequestedOutput(model_output) for model_output in step.outputs],
            parameters=request.parameters,
            is_cancelled=request.is_cancelled,
        )
        try:
            response = self._infer(step_request)
        except EdgeboxError as exc:
            raise EdgeboxError(
                f"{self._where}, step '{step.model_name}': {exc.message}", exc.code
            ) from None
        produced = {}
        for tensor in response.outputs:
            name = step.outputs.get(tensor.name)
            if name is not None:
                produced[name] = Tensor(name, tensor.datatype, tensor.data)
        return produced


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view
