"""BLS calls of an isolated python model, both ends of the channel.

In the model's process, ``BlsCalls`` sends each call the model makes
(``InferenceRequest.exec``) to the daemon as an ``infer`` message under an id
of its own and waits for the ``infer_result`` with that id. Several may be in
flight at once (``async_exec`` calls gathered by an ``async def execute``, or
threads of the model): the child's reader thread hands each reply to the
caller waiting on its id.

In the daemon, ``BlsServer`` runs each call as any other request on a worker
thread of the process's own (at most ``MAX_CONCURRENT_BLS`` at a time, the
rest queue) and answers under its id. Each call's tensors travel in its own
message's payload, never in the shared regions the exchange in progress uses.
An answer whose process ended meanwhile is dropped: that exchange fails on its
own, and nothing in the process waits for it any more.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable

from edgebox.backends.base import InferFunction
from edgebox.backends.python import isolated_messages as messages
from edgebox.backends.python.channel import Channel, ChannelClosed
from edgebox.backends.python.tensor_region import layout, read, write
from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.tensors import InferRequest, InferResponse

# Named for the process each end logs in; the child's lines reach the
# daemon's log through its inherited stderr.
_daemon_log = logging.getLogger("edgebox.backends.python.isolated")
_child_log = logging.getLogger("edgebox.backends.python.isolated_child")

MAX_CONCURRENT_BLS = 16
"""BLS calls of one process served at once; more wait their turn in a queue."""


class BlsCalls:
    """In the model's process: the model's BLS calls to the daemon. Any
    thread may call ``infer``, and calls overlap; each waits for its own
    reply only. The reader thread gives each reply to ``answer`` and, once
    the channel closed, fails every waiting call with ``close``."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[int, _BlsReply] = {}
        """Calls sent and not yet answered, by id."""
        self._closed: ChannelClosed | None = None

    def infer(self, request: InferRequest) -> InferResponse:
        """Run ``request`` in the daemon as any request is run; its response,
        or the EdgeboxError it failed with. ChannelClosed once the daemon is
        gone."""
        descriptors, sources, end = layout(request.inputs)
        payload = bytearray(end)
        write(payload, descriptors, sources)
        waiting = _BlsReply()
        with self._lock:
            if self._closed is not None:
                raise ChannelClosed(str(self._closed))
            call_id = next(self._ids)
            self._waiting[call_id] = waiting
        message = {
            "op": "infer",
            "id": call_id,
            "request": messages.request_header(request, descriptors),
        }
        try:
            self._channel.send(message, payload)
        except ChannelClosed:
            with self._lock:
                self._waiting.pop(call_id, None)
            raise
        del payload
        header, payload = waiting.wait()
        if messages.is_error(header):
            raise messages.error_from_header(header)
        return messages.response_from_header(
            header["response"], lambda d: read(payload, d, copy=False)
        )

    def answer(self, header: dict, payload: bytearray) -> None:
        """An ``infer_result`` from the daemon, for the call waiting on its id."""
        with self._lock:
            waiting = self._waiting.pop(header.get("id"), None)
        if waiting is None:
            _child_log.error("a BLS reply for id %r, which no call waits for", header.get("id"))
            return
        waiting.give(header, payload)

    def close(self, error: ChannelClosed) -> None:
        """The channel closed: every waiting call, and every later one, fails."""
        with self._lock:
            self._closed = error
            waiting_calls = list(self._waiting.values())
            self._waiting.clear()
        for waiting in waiting_calls:
            waiting.fail(error)


class _BlsReply:
    """Where the reader thread leaves one BLS call's reply for its caller."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._reply: tuple[dict, bytearray] | None = None
        self._error: ChannelClosed | None = None

    def give(self, header: dict, payload: bytearray) -> None:
        self._reply = (header, payload)
        self._done.set()

    def fail(self, error: ChannelClosed) -> None:
        self._error = error
        self._done.set()

    def wait(self) -> tuple[dict, bytearray]:
        self._done.wait()
        if self._reply is None:
            raise ChannelClosed(str(self._error))
        return self._reply


class BlsServer:
    """In the daemon: one process's BLS calls, run on up to
    ``MAX_CONCURRENT_BLS`` daemon threads started as calls come (and ended
    once none wait); the rest wait in a FIFO queue. Nothing is dropped: the
    queue holds what the model sent, and each call's thread in the model
    waits for its answer. ``submit`` is called by the thread running the
    exchange with the process; ``alive`` says whether it still runs."""

    def __init__(self, label: str, channel: Channel, alive: Callable[[], bool]) -> None:
        self._label = label
        self._channel = channel
        self._alive = alive
        self._lock = threading.Lock()
        self._queue: deque[tuple[dict, bytearray, InferFunction | None]] = deque()
        self._threads = 0

    def submit(self, header: dict, payload: bytearray, infer: InferFunction | None) -> None:
        """Serve the ``infer`` message ``header`` with ``infer`` (the loading
        context's, None when the model may call no other model)."""
        with self._lock:
            self._queue.append((header, payload, infer))
            if self._threads >= MAX_CONCURRENT_BLS:
                return
            self._threads += 1
        threading.Thread(target=self._work, name=f"bls-{self._label}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._threads -= 1
                    return
                call = self._queue.popleft()
            try:
                self._serve(*call)
            except ChannelClosed:
                pass
            except Exception:
                _daemon_log.exception("%s: serving a BLS request failed", self._label)

    def _serve(self, header: dict, payload: bytearray, infer: InferFunction | None) -> None:
        """Run the model's BLS request and send back its response or error
        under the request's id; only the model's own request fails if it is
        bad."""
        call_id = header.get("id")
        if not self._alive():
            return
        try:
            request = messages.request_from_header(
                header["request"], lambda d: read(payload, d, copy=False)
            )
        except (KeyError, TypeError, ValueError) as exc:
            self._fail(call_id, EdgeboxError(f"BLS request: {exc}", ErrorCode.INVALID_ARG))
            return
        if infer is None:
            self._fail(
                call_id,
                EdgeboxError(
                    f"BLS request to model '{request.model_name}': no inference function was "
                    "given to the python backend, so other models cannot be called",
                    ErrorCode.UNAVAILABLE,
                ),
            )
            return
        try:
            response = infer(request)
        except EdgeboxError as err:
            self._fail(call_id, err)
            return
        except Exception as exc:
            _daemon_log.exception("BLS request to model '%s' failed", request.model_name)
            self._fail(
                call_id,
                EdgeboxError(
                    f"BLS request to model '{request.model_name}': {type(exc).__name__}: {exc}"
                ),
            )
            return
        descriptors, sources, end = layout(response.outputs)
        data = bytearray(end)
        write(data, descriptors, sources)
        self._channel.send(
            {
                "op": "infer_result",
                "id": call_id,
                "response": messages.response_header(response, descriptors),
            },
            data,
        )

    def _fail(self, call_id: object, error: EdgeboxError) -> None:
        self._channel.send({"op": "infer_result", "id": call_id, **messages.error_header(error)})
