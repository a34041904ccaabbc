"""Loads a Triton ``model.py`` into the daemon's interpreter and runs it.

Triton runs each instance in a stub process; edgebox runs it in-process, which
saves the shared-memory copies but means the model shares ``sys.path`` and
``sys.modules`` with the daemon and with other python models. So:

* each version's model.py is imported once, under a module name of its own;
* its folder is on ``sys.path`` while the version is loaded, so model.py can
  import sibling modules as it can under Triton;
* sibling modules imported while model.py loads are dropped from
  ``sys.modules`` right after, so two models that each ship a ``utils.py`` get
  their own (a sibling imported lazily inside ``execute`` is found through
  ``sys.path`` and may resolve to another loaded model's file of that name);
* nothing the model does (raise, return the wrong thing) escapes ``execute``:
  not even a ``BaseException`` (KeyboardInterrupt, SystemExit,
  asyncio.CancelledError, GeneratorExit) raised by the model's code, which
  fails its requests like any other error. The daemon takes SIGINT and SIGTERM
  through signal handlers, so none of these comes from outside;
* an output the model may still hold (a buffer it reuses, as Triton allows) is
  copied, so the model's next call cannot change an answer still being sent;
  an output nothing else references is passed on as is (see
  ``_reference_counts``).

The model's code is never given the daemon's objects: it sees pb_utils types
only, and BLS calls go through the infer function in the ``ModelContext``.
Spec: https://github.com/triton-inference-server/python_backend#usage
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import inspect
import itertools
import json
import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from google.protobuf import json_format

from edgebox.backends import base
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import triton_python_backend_utils as pb_utils
from edgebox.errors import EdgeboxError, Unavailable
from edgebox.repository.config import ModelConfig, config_to_dict
from edgebox.repository.config_rules import check_model_config
from edgebox.responses import ResponseSink
from edgebox.tensors import InferRequest, InferResponse

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # numpy < 2.0
    from numpy import byte_bounds

PB_UTILS_MODULE_NAME = "triton_python_backend_utils"
MODEL_CLASS_NAME = "TritonPythonModel"

_log = logging.getLogger("edgebox.backends.python")

# sys.path and sys.modules are process-wide; imports of model.py files take
# turns so each sees its own folder first on sys.path and so the sibling
# cleanup only drops modules its own import added.
_import_lock = threading.Lock()
_module_numbers = itertools.count(1)


@dataclass
class _LoadedVersion:
    context: ModelContext
    """Held so the id() key of ``Backend._loaded`` cannot be reused."""
    module: ModuleType
    model_class: type
    path_entry: str


class Backend(base.Backend):
    """Runs ``backend: "python"`` models. ``complete_config``, ``load_instance``
    and ``unload`` must be handed the same ``ModelContext`` object for one
    loaded version; two loads of the same (model, version), as during a reload,
    stay apart."""

    name = "python"

    def __init__(self) -> None:
        self._loaded: dict[int, _LoadedVersion] = {}
        self._lock = threading.Lock()

    def complete_config(self, context: ModelContext) -> None:
        loaded = self._import(context)
        try:
            auto_complete = getattr(loaded.model_class, "auto_complete_config", None)
            if auto_complete is not None:
                _auto_complete(context, auto_complete)
        except BaseException:
            self.unload(context)
            raise

    def load_instance(self, context: ModelContext, instance: InstanceSpec) -> PythonInstance:
        with self._lock:
            loaded = self._loaded.get(id(context))
        if loaded is None:
            loaded = self._import(context)
        where = context.where
        version_dir = Path(context.version_dir)
        try:
            model = loaded.model_class()
        except BaseException as exc:
            raise _load_failure(
                f"{where}: {MODEL_CLASS_NAME}() raised {describe_exception(exc, version_dir)}", exc
            ) from None
        initialize = getattr(model, "initialize", None)
        if initialize is not None:
            args = {
                "model_config": json.dumps(config_to_dict(context.config)),
                "model_instance_kind": instance.kind,
                "model_instance_name": instance.name,
                "model_instance_device_id": str(instance.device_id),
                "model_repository": str(context.model_dir),
                "model_version": str(context.version),
                "model_name": context.name,
            }
            try:
                initialize(args)
            except BaseException as exc:
                raise _load_failure(
                    f"{where}: initialize() raised {describe_exception(exc, version_dir)}", exc
                ) from None
        return PythonInstance(context, model)

    def unload(self, context: ModelContext) -> None:
        with self._lock:
            loaded = self._loaded.pop(id(context), None)
            # Another load of the same folder (a reload) keeps its model module.
            still_loaded = {other.module.__name__ for other in self._loaded.values()}
        if loaded is None:
            return
        with _import_lock:
            sys.modules.pop(loaded.module.__name__, None)
            _forget_modules_under(loaded.path_entry, keep=still_loaded)
            if loaded.path_entry in sys.path:
                sys.path.remove(loaded.path_entry)

    def _import(self, context: ModelContext) -> _LoadedVersion:
        if context.infer is not None:
            pb_utils._bind_infer_function(context.infer)
        if context.infer_stream is not None:
            pb_utils._bind_infer_stream_function(context.infer_stream)
        path = context.model_file()
        loaded = _import_model(context, path)
        with self._lock:
            previous = self._loaded.get(id(context))
            self._loaded[id(context)] = loaded
        if previous is not None:
            # A second complete_config for the same context: keep only the new import.
            with _import_lock:
                sys.modules.pop(previous.module.__name__, None)
                if previous.path_entry in sys.path:
                    sys.path.remove(previous.path_entry)
        return loaded


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
        self._event_loop: _EventLoop | None = None
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
        held = _held_outputs(_reference_counts(returned))
        return [
            self._convert(response, request, pb_request, held)
            for response, request, pb_request in zip(returned, requests, pb_requests, strict=True)
        ]

    def execute_decoupled(
        self, requests: Sequence[InferRequest], sinks: Sequence[ResponseSink]
    ) -> None:
        """``DecoupledInstance``: each request gets a response sender that
        sends to its sink. ``execute`` must return None; when it raises (or
        returns something), the requests whose sender is still open fail with
        that error; a thread the model started may still be sending to the others."""
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
                None if response is None else self._convert(response, request, pb_request, _ALL)
            )
            try:
                sink.send(converted, final)
            except EdgeboxError as exc:
                raise pb_utils.TritonModelException(str(exc)) from None

        return deliver

    def _loop(self) -> _EventLoop:
        """The instance's event loop, started at its first ``async def
        execute`` call. Calls reach here one at a time (the instance pool),
        so no lock is needed."""
        if self._event_loop is None:
            self._event_loop = _EventLoop(self._loop_name)
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
                if not _inside_any(output.data, inputs):
                    output.data = output.data.copy()
            outputs.append(output)
        return InferResponse(
            self._model_name,
            model_version=str(self._model_version),
            outputs=outputs,
            id=request.id,
            parameters=json.loads(response.parameters()),
        )


class _EventLoop:
    """The asyncio loop an instance's ``async def execute`` runs on, as
    python_backend keeps one per stub process: one loop per instance, on a
    thread of its own (the calls reach the instance on varying threads), for
    the instance's lifetime, so objects a coroutine binds to the loop stay
    usable across calls.

    A non-decoupled execute is waited for (``run``): the calling thread
    blocks, the instance stays busy, as under Triton; other instances and
    models run meanwhile, and its ``async_exec`` calls run at once. A
    decoupled execute is started (``start``) and left running: the instance
    takes its next call while it awaits, so one instance holds many requests.
    """

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def run(self, coroutine: Any) -> Any:
        """Run ``coroutine`` to its end; its result, or what it raised."""
        return self.start(coroutine).result()

    def start(self, coroutine: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel what still runs, let the cancelled coroutines and the BLS
        threads finish (up to ``timeout_s`` each), then stop the loop."""

        async def shutdown() -> None:
            current = asyncio.current_task()
            tasks = [task for task in asyncio.all_tasks() if task is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._loop.shutdown_default_executor()

        try:
            self.start(shutdown()).result(timeout_s)
        except BaseException as exc:
            _log.error("stopping the event loop '%s' failed: %r", self._thread.name, exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._loop.close()


class _Everything:
    """Holds every output: a decoupled model's outputs are always copied."""

    def __contains__(self, item: object) -> bool:
        return True


_ALL = _Everything()


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


# ---------------------------------------------------------------- who owns an output


def _reference_counts(returned: list) -> list[tuple[pb_utils.Tensor, tuple[int, ...]]]:
    """Each output tensor with ``sys.getrefcount`` of every object between
    ``returned`` and the output's memory: the list, the response, its tensor
    list, the tensor, the array and the array that owns the memory (-1 when the
    array owns it). A count above the calibrated one means something outside
    that chain holds a way to the memory. Types other than pb_utils' own and
    memory not owned by a numpy array give counts of 1 << 30: always held."""
    unknown = 1 << 30
    counted = []
    returned_count = sys.getrefcount(returned)
    for response in returned:
        if type(response) is not pb_utils.InferenceResponse:
            continue
        response_count = sys.getrefcount(response)
        tensors = response._output_tensors
        tensors_count = sys.getrefcount(tensors)
        for tensor in tensors:
            if type(tensor) is not pb_utils.Tensor or type(tensor._array) is not np.ndarray:
                counted.append((tensor, (unknown,)))
                continue
            array = tensor._array
            base = array.base
            if base is None:
                base_count = -1 if array.flags.owndata else unknown
            elif type(base) is np.ndarray and base.base is None and base.flags.owndata:
                base_count = sys.getrefcount(base)
            else:
                base_count = unknown
            counts = (
                returned_count,
                response_count,
                tensors_count,
                sys.getrefcount(tensor),
                sys.getrefcount(array),
                base_count,
            )
            counted.append((tensor, counts))
    return counted


def _calibrate_reference_counts() -> tuple[int, ...] | None:
    """The counts ``_reference_counts`` sees for outputs nothing else holds,
    measured on this interpreter rather than assumed (they differ between
    Python versions). None, so that every output is copied, unless a fresh
    array and a fresh view measure alike and one more reference to any link
    of the chain shows in its count."""

    def fresh(array: np.ndarray) -> list:
        return [pb_utils.InferenceResponse([pb_utils.Tensor("x", array)])]

    def chain(returned: list) -> list:
        response = returned[0]
        tensor = response._output_tensors[0]
        return [returned, response, response._output_tensors, tensor, tensor._array]

    returned = fresh(np.empty(4)[1:])
    ((_, limits),) = _reference_counts(returned)
    returned = fresh(np.empty(4))
    ((_, counts),) = _reference_counts(returned)
    if counts[:5] != limits[:5] or counts[5] != -1:
        return None
    for index in range(6):
        returned = fresh(np.empty(4)[1:])
        extra = chain(returned)[index] if index < 5 else returned[0]._output_tensors[0]._array.base
        ((_, counts),) = _reference_counts(returned)
        del extra
        if counts[index] <= limits[index]:
            return None
    return limits


def _held_outputs(counted: list[tuple[pb_utils.Tensor, tuple[int, ...]]]) -> set[int]:
    """ids of the output tensors whose memory something besides the returned
    list may reach: the model (a reused buffer, a kept tensor or response),
    another output, or memory no numpy array owns."""
    limits = _REFERENCE_COUNT_LIMITS
    held = set()
    for tensor, counts in counted:
        if (
            limits is None
            or len(counts) != len(limits)
            or any(count > limit for count, limit in zip(counts, limits, strict=True))
        ):
            held.add(id(tensor))
    return held


def _inside_any(array: np.ndarray, owners: list[np.ndarray]) -> bool:
    """Whether ``array``'s memory lies within one of ``owners``' (the
    request's own inputs, which live as long as the request)."""
    low, high = byte_bounds(array)
    for owner in owners:
        owner_low, owner_high = byte_bounds(owner)
        if owner_low <= low and high <= owner_high:
            return True
    return False


_REFERENCE_COUNT_LIMITS = _calibrate_reference_counts()


def _auto_complete(context: ModelContext, auto_complete: Any) -> None:
    """Triton's auto-complete: the model may fill max_batch_size, inputs,
    outputs, dynamic batching and the transaction policy. The result replaces
    ``context.config`` in place, so holders of the message see it."""
    where = context.where
    version_dir = Path(context.version_dir)
    given = pb_utils.ModelConfig(config_to_dict(context.config))
    try:
        result = auto_complete(given)
    except BaseException as exc:
        raise _load_failure(
            f"{where}: auto_complete_config() raised {describe_exception(exc, version_dir)}", exc
        ) from None
    if not isinstance(result, pb_utils.ModelConfig):
        raise Unavailable(
            f"{where}: auto_complete_config() returned {type(result).__name__}, expected "
            "the pb_utils.ModelConfig it was given"
        )
    adopt_completed_config(context, result.as_dict())


def adopt_completed_config(context: ModelContext, completed_config: dict) -> None:
    """Replace ``context.config`` in place with what ``auto_complete_config()``
    produced (its dict form), once it passes the checks a config file gets.
    Also how an isolated model's completion, made in its own process, comes in."""
    where = context.where
    completed = ModelConfig()
    try:
        json_format.ParseDict(completed_config, completed, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise Unavailable(
            f"{where}: auto_complete_config() produced an invalid config: {exc}"
        ) from None
    problems = check_model_config(completed)
    if problems:
        field_path, message = problems[0]
        raise Unavailable(
            f"{where}: config after auto_complete_config() is invalid at '{field_path}': {message}"
        )
    context.config.CopyFrom(completed)


def _import_model(context: ModelContext, path: Path) -> _LoadedVersion:
    where = context.where
    version_dir = Path(context.version_dir)
    path_entry = str(version_dir)
    safe_name = re.sub(r"\W", "_", context.name)
    module_name = f"edgebox_model_{safe_name}_v{context.version}_{next(_module_numbers)}"
    sys.modules[PB_UTILS_MODULE_NAME] = pb_utils
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise Unavailable(f"{where}: cannot import '{path}': not a Python source file")
    with _import_lock:
        sys.path.insert(0, path_entry)
        before = set(sys.modules)
        # Compiled files would land in the model repository, which may be
        # read-only and whose changes the repository poller watches.
        dont_write_bytecode = sys.dont_write_bytecode
        sys.dont_write_bytecode = True
        try:
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        except BaseException as exc:
            sys.modules.pop(module_name, None)
            sys.path.remove(path_entry)
            raise _load_failure(
                f"{where}: cannot import '{path}': {describe_exception(exc, version_dir)}", exc
            ) from None
        finally:
            sys.dont_write_bytecode = dont_write_bytecode
            _forget_modules_under(path_entry, keep={module_name}, only=set(sys.modules) - before)
    model_class = getattr(module, MODEL_CLASS_NAME, None)
    if not isinstance(model_class, type):
        with _import_lock:
            sys.modules.pop(module_name, None)
            sys.path.remove(path_entry)
        raise Unavailable(f"{where}: '{path}' defines no class '{MODEL_CLASS_NAME}'")
    if not callable(getattr(model_class, "execute", None)):
        with _import_lock:
            sys.modules.pop(module_name, None)
            sys.path.remove(path_entry)
        raise Unavailable(f"{where}: '{path}': class '{MODEL_CLASS_NAME}' has no execute() method")
    return _LoadedVersion(context, module, model_class, path_entry)


def _load_failure(message: str, exc: BaseException) -> Unavailable:
    """The load error for a failure in the model's own code; the traceback
    goes to the log, the message to the model's state reason."""
    _log.error("%s", message, exc_info=exc)
    return Unavailable(message)


def _forget_modules_under(folder: str, keep: set[str], only: set[str] | None = None) -> None:
    """Drop modules whose file lies in ``folder`` from sys.modules; the model
    code that imported them keeps its references. Callers hold ``_import_lock``."""
    prefix = os.path.join(os.path.abspath(folder), "")
    names = list(sys.modules) if only is None else list(only)
    for name in names:
        if name in keep:
            continue
        module = sys.modules.get(name)
        filename = getattr(module, "__file__", None)
        if filename and os.path.abspath(filename).startswith(prefix):
            del sys.modules[name]


def describe_exception(exc: BaseException, version_dir: Path) -> str:
    """``ZeroDivisionError: division by zero (model.py line 12)``: the type,
    the message, and the deepest line of the model's own files it passed
    through, which is where its author will look."""
    if isinstance(exc, SyntaxError):
        text = f"{type(exc).__name__}: {exc.msg}"
        location = _location(exc.filename, exc.lineno, version_dir)
    else:
        detail = str(exc)
        text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        location = None
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if _is_under(frame.filename, version_dir):
                location = _location(frame.filename, frame.lineno, version_dir)
                break
    return f"{text} ({location})" if location else text


def _is_under(filename: str | None, folder: Path) -> bool:
    if not filename:
        return False
    prefix = os.path.join(os.path.abspath(folder), "")
    return os.path.abspath(filename).startswith(prefix)


def _location(filename: str | None, lineno: int | None, version_dir: Path) -> str | None:
    if not filename:
        return None
    if _is_under(filename, version_dir):
        shown = os.path.relpath(os.path.abspath(filename), os.path.abspath(version_dir))
    else:
        shown = filename
    return f"{shown} line {lineno}" if lineno else shown
