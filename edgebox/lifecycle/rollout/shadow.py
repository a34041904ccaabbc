"""Shadow traffic: copies of live requests answered by a new version that
clients never hear from.

The request's thread hands over a copy only when the queue has room (two
pairs); otherwise the sample is dropped and counted, so a busy model pays
nothing but a counter. One worker thread per rollout runs the copies one at
a time, so the new version never takes more than one execution's worth of
the device beside the serving one; a copy that waited longer than
``STALE_S`` is dropped rather than run late. The worker is not given a lower
OS priority: it holds Python's interpreter lock while it prepares a request,
and a thread the kernel keeps waiting while it holds that lock would hold up
every request thread with it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import numpy as np

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.lifecycle.registry import ServedModel
from edgebox.lifecycle.rollout.compare import Compare
from edgebox.lifecycle.rollout.gates import Tally
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor

log = logging.getLogger(__name__)

QUEUE_SIZE = 2
STALE_S = 2.0


class ShadowRunner:
    def __init__(
        self,
        candidate: ServedModel,
        compare: Compare,
        tally: Tally,
        progressed: Callable[[], None],
        wanted: int,
    ) -> None:
        self._candidate = candidate
        self._wanted = wanted
        self._compare = compare
        self._tally = tally
        self._progressed = progressed
        self._queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self._lock = threading.Lock()
        self._accepted = 0
        """Copies taken and not given back: answered, or waiting in the queue."""
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"shadow-{candidate.name}-{candidate.version}", daemon=True
        )
        self._thread.start()

    def offer(self, request: InferRequest, response: InferResponse) -> None:
        """On the request's thread, after the serving version answered; once
        the rollout has all its samples (or has them queued), nothing more."""
        with self._lock:
            if self._stopped.is_set() or self._accepted >= self._wanted:
                return
            if self._queue.full():
                self._tally.drop()
                return
            self._accepted += 1
        pair = (time.monotonic(), _copied_request(request), _answer(response))
        try:
            self._queue.put_nowait(pair)
        except queue.Full:
            self._tally.drop()
            self._uncount()

    def stop(self) -> None:
        """No more copies; one being answered finishes on its own."""
        self._stopped.set()
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass

    def _run(self) -> None:
        while not self._stopped.is_set():
            item = self._queue.get()
            if item is None or self._stopped.is_set():
                return
            offered, request, expected = item
            if time.monotonic() - offered > STALE_S:
                self._tally.drop()
                self._uncount()
                continue
            if not self._answer(request, expected):
                self._uncount()
            self._progressed()

    def _uncount(self) -> None:
        """A copy that will not be a sample: another may take its place."""
        with self._lock:
            self._accepted -= 1

    def _answer(self, request: InferRequest, expected: dict[str, np.ndarray]) -> bool:
        """Whether the copy made a sample (a refused request does not)."""
        candidate = self._candidate
        if not candidate.enter():
            return False
        started = time.perf_counter()
        try:
            response = candidate.scheduler.infer(request)
        except EdgeboxError as exc:
            if exc.code is ErrorCode.INVALID_ARG:
                return False
            self._tally.candidate(None, str(exc))
            return True
        except Exception as exc:
            log.exception("%s: a shadow request failed", candidate.where)
            self._tally.candidate(None, f"{type(exc).__name__}: {exc}")
            return True
        finally:
            candidate.exit()
        latency_s = time.perf_counter() - started
        verdict = self._compare(expected, _answer(response))
        self._tally.compared(latency_s, verdict.agree, verdict.detail)
        return True


def _copied_request(request: InferRequest) -> InferRequest:
    """A request of its own: the inputs may be views of a client's shared
    memory or of a body that is reused once the answer is sent."""
    return InferRequest(
        model_name=request.model_name,
        inputs=[Tensor(t.name, t.datatype, np.array(t.data, copy=True)) for t in request.inputs],
        model_version="",
        id=request.id,
        outputs=[RequestedOutput(o.name) for o in request.outputs],
        parameters=dict(request.parameters),
    )


def _answer(response: InferResponse) -> dict[str, np.ndarray]:
    return {t.name: np.array(t.data, copy=True) for t in response.outputs}
