"""One request, one ``execute``: the scheduler for models without
``dynamic_batching``. The request runs on the caller's thread on the first free
instance and its one final response is sent to the sink on that thread before
``submit`` returns, so a lone client pays no thread hand-off.

Whatever ``execute`` raises, ``BaseException``s included, fails only that
request (a 500 naming the exception) and the instance goes back to the pool.
Statistics count as Triton 2.51 does (``answered``): an error the model
answered with is a success; a failed execute is one execution, no inference,
one failure. A
request whose client gave up while it waited for an instance is answered
CANCELLED without running.
"""

from __future__ import annotations

import logging
import time

from edgebox.errors import Cancelled, EdgeboxError, one_line
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.scheduling.scheduler import SynchronousScheduler
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse

log = logging.getLogger(__name__)


class DirectScheduler(SynchronousScheduler):
    failure: str | None = None
    """Never set: a failed execute costs one request, never the scheduler."""

    def __init__(self, pool: InstancePool, signature: ModelSignature, where: str) -> None:
        self.statistics = ModelStatistics()
        self._pool = pool
        self._signature = signature
        self._where = where

    def infer(self, request: InferRequest) -> InferResponse:
        clock = time.perf_counter_ns
        start = clock()
        instance = self._pool.acquire()
        try:
            with self._pool.running(instance):
                acquired = clock()
                if request.cancelled():
                    self.statistics.record_request(False, acquired - start)
                    raise cancelled_error(self._where)
                model_request = self._signature.to_model_shapes(request)
                prepared = clock()
                try:
                    result = instance.execute([model_request])[0]
                except BaseException as exc:
                    log.exception("%s: execute raised", self._where)
                    result = EdgeboxError(f"{self._where}: backend failed: {one_line(exc)}")
                executed = clock()
        finally:
            self._pool.release(instance)
        try:
            if isinstance(result, EdgeboxError):
                raise result
            result = finish_response(result, request, self._signature, self._where)
        except EdgeboxError as exc:
            result = exc
        done = clock()
        batch = (
            request.inputs[0].data.shape[0]
            if self._signature.max_batch_size and request.inputs
            else 1
        )
        ok = answered(result)
        self.statistics.record_execution(
            batch,
            int(ok),
            prepared - acquired,
            executed - prepared,
            done - executed,
            inferences=batch if ok else 0,
        )
        self.statistics.record_request(ok, done - start, acquired - start)
        if isinstance(result, EdgeboxError):
            raise result
        return result

    def close(self) -> None:
        self._pool.close()


def answered(result: object) -> bool:
    """Whether the model answered the request, with a response or with an error
    of its own (``EdgeboxError.answered_by_model``): Triton 2.51 counts both as
    a success (inference, queue and compute counts). Any other error means the
    execute (or the checks of its answer) failed: a failure, no inference."""
    return not isinstance(result, EdgeboxError) or result.answered_by_model


def execute_all(
    instance, requests: list[InferRequest], where: str
) -> list[InferResponse | EdgeboxError]:
    """``instance.execute`` as a batcher needs it: exactly one result per
    request, whatever happened. What it raises, ``BaseException``s included,
    or a wrong count of results, becomes every request's error, so a batcher's
    worker never dies of a model."""
    try:
        results = instance.execute(requests)
        if len(results) != len(requests):
            raise EdgeboxError(
                f"{where}: backend returned {len(results)} results for {len(requests)} requests"
            )
    except EdgeboxError as exc:
        return [exc] * len(requests)
    except BaseException as exc:
        log.exception("%s: execute raised", where)
        error = EdgeboxError(f"{where}: backend failed: {one_line(exc)}")
        return [error] * len(requests)
    return list(results)


def cancelled_error(where: str) -> Cancelled:
    return Cancelled(f"{where}: request cancelled: its client gave up while it waited; not run")


def finish_response(
    response: InferResponse, request: InferRequest, signature: ModelSignature, where: str
) -> InferResponse:
    """Client shapes, then exactly the outputs asked for, each checked against
    the config, so a backend's mistake is reported as the model's, not passed on.
    An output of another datatype than the config's is the exception: Triton
    2.51 answers it with the model's datatype, unconverted (a python model
    returning float64 for TYPE_FP32), so it passes with one warning."""
    response = signature.to_client_shapes(response)
    produced = {t.name: t for t in response.outputs}
    if request.outputs:
        names = [o.name for o in request.outputs]
        missing = [n for n in names if n not in produced]
        if missing:
            raise EdgeboxError(
                f"{where}: the model did not return requested output(s) "
                + ", ".join(f"'{n}'" for n in missing)
            )
    else:
        names = [n for n in signature.outputs if n in produced]
    outputs = []
    for name in names:
        tensor = produced[name]
        spec = signature.outputs.get(name)
        if spec is not None:
            if tensor.datatype != spec.datatype and signature.first_passthrough(name):
                log.warning(
                    "%s, output '%s': the model returned %s, the config says %s; passed "
                    "through as %s, as Triton does (warned once per model version)",
                    where,
                    name,
                    tensor.datatype,
                    spec.datatype,
                    tensor.datatype,
                )
            if not spec.accepts(tensor.data.shape):
                raise EdgeboxError(
                    f"{where}, output '{name}': the model returned shape "
                    f"{list(tensor.data.shape)}, the config says {list(spec.shape)}"
                )
        outputs.append(tensor)
    response.outputs = outputs
    response.id = request.id
    return response
