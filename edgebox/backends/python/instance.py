"""One ``TritonPythonModel`` object in the daemon's process, as the
scheduler sees it.

Nothing the model does (raise, return the wrong thing) escapes ``execute``:
not even a ``BaseException`` (KeyboardInterrupt, SystemExit,
asyncio.CancelledError, GeneratorExit) raised by the model's code, which fails
its requests like any other error. The daemon takes SIGINT and SIGTERM through
signal handlers, so none of these comes from outside. An output the model may
still hold is copied (``output_ownership``). The model's code is never given
the daemon's objects: it sees pb_utils types only, and BLS calls go through
the infer function in the ``ModelContext``.
Spec: https://github.com/triton-inference-server/python_backend#usage
"""

from __future__ import annotations

import concurrent.futures
import inspect
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgebox.backends.base import ModelContext
from edgebox.backends.python import triton_python_backend_utils as pb_utils
from edgebox.backends.python.event_loop import EventLoop
from edgebox.backends.python.model_import import describe_exception
from edgebox.backends.python.output_ownership import (
    ALL,
    held_outputs,
    inside_any,
    reference_counts,
)
from edgebox.errors import EdgeboxError
from edgebox.responses import ResponseSink
from edgebox.tensors import InferRequest, InferResponse

_log = logging.getLogger("edgebox.backends.python")


class PythonInstance:
    """One ``TritonPythonModel`` object. The instance pool hands it to one
    thread at a time, so the model's ``execute`` is never re-entered."""

    def __init__(self, context: ModelContext, model: Any) -> None:
        self._model = model
        self._model_name = context.name
        self._model_version = context.version
        self._where = context.where
        self._version_dir = Path(context.version_dir)
        self._output_names = [output.name for output in context.config.output]
        self._closed = False
        self._event_loop: EventLoop | None = None
        self._loop_name = f"{context.name}-v{context.version}-asyncio"

    def execute(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        pb_requests = [
            pb_utils.InferenceRequest._wrap(
                request, self._model_name, self._model_version, self._output_names
            )
            for request in requests
        ]
        try:
            returned = self._model.execute(pb_requests)
            if inspect.iscoroutine(returned):
                returned = self._loop().run(returned)
        except BaseException as exc:
            message = (
                f"{self._where}: execute() raised {describe_exception(exc, self._version_dir)}"
            )
            _log.error("%s", message, exc_info=exc)
            return [EdgeboxError(message) for _ in requests]
        problem = _check_responses(returned, len(requests))
        if problem is not None:
            message = f"{self._where}: {problem}"
            _log.error("%s", message)
            return [EdgeboxError(message) for _ in requests]
        # Counted straight from this frame, as the calibration counts from its own.
        held = held_outputs(reference_counts(returned))
        return [
            self._convert(response, request, pb_request, held)
            for response, request, pb_request in zip(returned, requests, pb_requests, strict=True)
        ]

    def execute_decoupled(
        self, requests: Sequence[InferRequest], sinks: Sequence[ResponseSink]
    ) -> None:
        """The decoupled contract (``base.py``): each request gets a response
        sender that sends to its sink. ``execute`` must return None; when it
        raises (or returns something), the requests whose sender is still open
        fail with that error; a thread the model started may still be sending
        to the others."""
        pb_requests = []
        senders = []
        for request, sink in zip(requests, sinks, strict=True):
            pb_request = pb_utils.InferenceRequest._wrap(
                request, self._model_name, self._model_version, self._output_names
            )
            sender = pb_utils.InferenceResponseSender(
                self._deliverer(request, pb_request, sink), request.is_cancelled
            )
            pb_request._response_sender = sender
            pb_requests.append(pb_request)
            senders.append(sender)
        try:
            returned = self._model.execute(pb_requests)
        except BaseException as exc:
            self._decoupled_failed(senders, sinks, exc)
            return
        if inspect.iscoroutine(returned):
            # Triton runs a decoupled async execute in the background on the
            # instance's loop: the instance takes the next call meanwhile.
            future = self._loop().start(returned)
            future.add_done_callback(lambda done: self._decoupled_done(senders, sinks, done))
            return
        self._decoupled_returned(senders, sinks, returned)

    def _decoupled_done(
        self,
        senders: list[pb_utils.InferenceResponseSender],
        sinks: Sequence[ResponseSink],
        done: concurrent.futures.Future,
    ) -> None:
        """A background coroutine ended (on the loop's thread, or on the
        closing thread when ``close`` cancelled it)."""
        if done.cancelled():
            message = f"{self._where}: execute() was cancelled: the model is being unloaded"
            _fail_open(senders, sinks, EdgeboxError(message))
            return
        exc = done.exception()
        if exc is not None:
            self._decoupled_failed(senders, sinks, exc)
            return
        self._decoupled_returned(senders, sinks, done.result())

    def _decoupled_failed(
        self,
        senders: list[pb_utils.InferenceResponseSender],
        sinks: Sequence[ResponseSink],
        exc: BaseException,
    ) -> None:
        message = f"{self._where}: execute() raised {describe_exception(exc, self._version_dir)}"
        _log.error("%s", message, exc_info=exc)
        _fail_open(senders, sinks, EdgeboxError(message))

    def _decoupled_returned(
        self,
        senders: list[pb_utils.InferenceResponseSender],
        sinks: Sequence[ResponseSink],
        returned: Any,
    ) -> None:
        if returned is not None:
            message = (
                f"{self._where}: a decoupled model's execute() must return None, it returned "
                f"{type(returned).__name__}; send responses through "
                "request.get_response_sender()"
            )
            _log.error("%s", message)
            _fail_open(senders, sinks, EdgeboxError(message))

    def _deliverer(
        self, request: InferRequest, pb_request: pb_utils.InferenceRequest, sink: ResponseSink
    ):
        """The sender's way into ``sink``: a pb_utils response becomes edgebox's
        (outputs copied: a model that keeps sending may reuse its buffers)."""

        def deliver(response: pb_utils.InferenceResponse | None, final: bool) -> None:
            converted = (
                None if response is None else self._convert(response, request, pb_request, ALL)
            )
            try:
                sink.send(converted, final)
            except EdgeboxError as exc:
                raise pb_utils.TritonModelException(str(exc)) from None

        return deliver

    def _loop(self) -> EventLoop:
        """The instance's event loop, started at its first ``async def
        execute`` call. Calls reach here one at a time (the instance pool),
        so no lock is needed."""
        if self._event_loop is None:
            self._event_loop = EventLoop(self._loop_name)
        return self._event_loop

    def close(self) -> None:
        """``finalize``, then the event loop's end: coroutines still running
        (a decoupled request not finished) are cancelled, their requests
        failed. The model object is let go."""
        if self._closed:
            return
        self._closed = True
        finalize = getattr(self._model, "finalize", None)
        if finalize is not None:
            try:
                finalize()
            except BaseException as exc:
                _log.error(
                    "%s: finalize() raised %s",
                    self._where,
                    describe_exception(exc, self._version_dir),
                    exc_info=exc,
                )
        if self._event_loop is not None:
            self._event_loop.close()
        # The pool may keep this object; the model, and the custom metrics it
        # holds (which leave /metrics with it), must not outlive the unload.
        self._model = None

    def _convert(
        self,
        response: pb_utils.InferenceResponse,
        request: InferRequest,
        pb_request: pb_utils.InferenceRequest,
        held: set[int],
    ) -> InferResponse | EdgeboxError:
        if response.has_error():
            error = response.error()
            return EdgeboxError(
                f"{self._where}: {error}",
                pb_utils._edgebox_code(error.code()),
                answered_by_model=True,
            )
        wanted = {output.name for output in request.outputs}
        outputs = []
        for tensor in response.output_tensors():
            if wanted and tensor.name() not in wanted:
                continue
            try:
                output = pb_utils._to_edgebox_tensor(tensor)
            except ValueError as exc:
                return EdgeboxError(f"{self._where}, output '{tensor.name()}': {exc}")
            if output.data is tensor.as_numpy() and id(tensor) in held:
                inputs = [t.as_numpy() for t in pb_request.inputs()]
                if not inside_any(output.data, inputs):
                    output.data = output.data.copy()
            outputs.append(output)
        return InferResponse(
            self._model_name,
            model_version=str(self._model_version),
            outputs=outputs,
            id=request.id,
            # Through JSON, as Triton reads them: what a client could not be sent fails here.
            parameters=json.loads(response.parameters()) if response._parameters else {},
        )


def _fail_open(
    senders: list[pb_utils.InferenceResponseSender],
    sinks: Sequence[ResponseSink],
    error: EdgeboxError,
) -> None:
    """The final error for each request whose model has not sent its final."""
    for sender, sink in zip(senders, sinks, strict=True):
        if sender._close():
            try:
                sink.send(error, True)
            except EdgeboxError:
                _log.exception("failing a decoupled request: its sink refused the final")


def _check_responses(returned: Any, request_count: int) -> str | None:
    """What is wrong with ``execute``'s return value, or None."""
    if not isinstance(returned, list):
        return (
            f"execute() returned {type(returned).__name__}, expected a list of "
            "pb_utils.InferenceResponse"
        )
    if len(returned) != request_count:
        return f"execute() returned {len(returned)} responses for {request_count} requests"
    for index, response in enumerate(returned):
        if not isinstance(response, pb_utils.InferenceResponse):
            return (
                f"execute() returned {type(response).__name__} at index {index}, "
                "expected a pb_utils.InferenceResponse"
            )
    return None
