"""``inference.GRPCInferenceService``: each RPC checks access, then calls the
verb its HTTP route calls (the dataplane's, or ``RepositoryControl``'s for the
repository extension) and renders the result.

Runs on the synchronous gRPC server's handler threads (``server.GrpcServer``):
a unary call runs start to end on the thread grpc answers it on, at most
``thread_count`` of them doing work at once. That is the cheaper path per call:
``grpc.aio`` with a hop to a worker thread cost about twice the server CPU
(bench/RESULTS.md, "gRPC per-call cost").

``ModelStreamInfer`` runs each request through ``DataPlane.infer_stream`` and
streams every response as the model sends it: one for an ordinary model, zero
or many for a decoupled one (each carrying ``triton_final_response``), or
``error_message`` with the text a unary call would carry, as Triton does. A
final that comes without a response is sent as an empty response only when
the client asked (``triton_enable_empty_final_response``). Up to
``stream_in_flight`` requests of one stream run at once on the stream worker
pool, each until its final, and are answered as they finish (a client matches
them by ``id``), so a stream can fill a dynamic batch. An open stream holds
its handler thread and a reader thread, idle or not, so streams are bounded
(``StreamSlots``) and never take the threads unary calls are answered on. At
shutdown a stream stops reading, answers what it read, then ends UNAVAILABLE.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import Any, TypeVar

import grpc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from edgebox.dataplane import DataPlane
from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable, Unsupported
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.audit import audited, audited_load
from edgebox.protocol.grpc import infer_codec, raw_messages, render, settings_codec
from edgebox.protocol.grpc.access import API_OF_METHOD, metadata_of, peer_address, refusal
from edgebox.protocol.grpc.error_map import status_of
from edgebox.protocol.grpc.stream_sink import (
    EMPTY_FINAL_PARAMETER,
    INTERNAL_ERROR,
    Emit,
    StreamSink,
    stream_error,
)
from edgebox.protocol.grpc.stream_slots import StreamSlots
from edgebox.protocol.shared_memory import RegionLease, SharedMemoryRegistry
from edgebox.repository.override_files import is_file_parameter
from edgebox.repository_control import RepositoryControl
from edgebox.responses import UNARY_REFUSAL_GRPC, DecoupledUnary

log = logging.getLogger("edgebox.grpc")

T = TypeVar("T")

SHUTTING_DOWN = "the server is shutting down; this stream takes no more requests"
"""How a stream open at shutdown ends (UNAVAILABLE), once the requests it
had sent are answered."""

_STARTED = object()
"""A stream's reader started a request: one more final to wait for."""
_READ_ALL = object()
"""A stream's reader has no more requests (the client closed its side, or left)."""
_WAKE = object()
"""Look again at the stream's state: the call ended, or the server is draining."""


class InferenceService(service_pb2_grpc.GRPCInferenceServiceServicer):
    """The servicer: its methods run on grpc's handler threads; a stream's
    requests run on ``pool``."""

    def __init__(
        self,
        dataplane: DataPlane,
        repository_control: RepositoryControl,
        policy: AccessPolicy,
        pool: Executor,
        stream_in_flight: int = 32,
        shared_memory: SharedMemoryRegistry | None = None,
        work_slots: int = 32,
        stream_slots: StreamSlots | None = None,
        readers: Executor | None = None,
    ) -> None:
        """``work_slots``: unary calls doing work at once (the rest wait);
        ``readers``: where each open stream's requests are read (a thread
        each, as many as ``stream_slots`` allows)."""
        self._dataplane = dataplane
        self._repository_control = repository_control
        self._shared_memory = shared_memory or SharedMemoryRegistry()
        self._policy = policy
        self._pool = pool
        self._readers = readers or pool
        self._stream_in_flight = max(1, stream_in_flight)
        self._work = threading.BoundedSemaphore(max(1, work_slots))
        self.stream_slots = stream_slots or StreamSlots(128, 32)
        self._draining = threading.Event()
        self._lock = threading.Lock()
        self._open_streams: set[queue.SimpleQueue] = set()

    def begin_drain(self) -> None:
        """At shutdown, any thread: every open stream stops taking requests,
        answers those it has and ends UNAVAILABLE."""
        self._draining.set()
        with self._lock:
            for answers in self._open_streams:
                answers.put(_WAKE)

    # -- health and metadata ---------------------------------------------------

    def ServerLive(self, request, context):
        self._admit("ServerLive", context)
        return pb.ServerLiveResponse(live=self._dataplane.live())

    def ServerReady(self, request, context):
        self._admit("ServerReady", context)
        return pb.ServerReadyResponse(ready=self._dataplane.ready())

    def ModelReady(self, request, context):
        self._admit("ModelReady", context)
        ready = self._run(context, self._model_ready, request.name, request.version)
        return pb.ModelReadyResponse(ready=ready)

    def ServerMetadata(self, request, context):
        self._admit("ServerMetadata", context)
        return render.server_metadata(self._dataplane.server_metadata())

    def ModelMetadata(self, request, context):
        self._admit("ModelMetadata", context)
        result = self._run(context, self._dataplane.model_metadata, request.name, request.version)
        return render.model_metadata(result)

    def ModelConfig(self, request, context):
        self._admit("ModelConfig", context)
        config = self._run(context, self._dataplane.model_config, request.name, request.version)
        return render.model_config(config)

    def ModelStatistics(self, request, context):
        self._admit("ModelStatistics", context)
        entries = self._run(context, self._dataplane.statistics, request.name, request.version)
        return render.statistics(entries)

    # -- inference ---------------------------------------------------------------

    def ModelInfer(self, request, context):
        self._admit("ModelInfer", context)
        return self._run(context, self._infer, request, _left(context), work_slot=True)

    def ModelInferRaw(self, data: bytes, context) -> bytes:
        """``ModelInfer`` as the server registers it: the request's bytes in,
        the answer's bytes out, the tensors never copied by protobuf
        (``raw_messages``)."""
        self._admit("ModelInfer", context)
        return self._run(context, self._infer_raw, data, _left(context), work_slot=True)

    def ModelStreamInfer(
        self, request_iterator: Iterator[pb.ModelInferRequest], context
    ) -> Iterator[pb.ModelStreamInferResponse]:
        self._admit("ModelStreamInfer", context)
        client = peer_address(context.peer())
        refused = self.stream_slots.take(client)
        if refused is not None:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
        try:
            yield from self._stream(request_iterator, context)
        finally:
            self.stream_slots.give(client)

    def _stream(
        self, request_iterator: Iterator[pb.ModelInferRequest], context
    ) -> Iterator[pb.ModelStreamInferResponse]:
        answers: queue.SimpleQueue = queue.SimpleQueue()
        # Not bounded: once the stream has ended, one extra release wakes a
        # reader waiting for a slot that a never-finishing request holds.
        slots = threading.Semaphore(self._stream_in_flight)
        done = threading.Event()

        def emit(answer: pb.ModelStreamInferResponse | None, final: bool) -> None:
            # Any thread: a stream worker, a batcher worker, a decoupled model's own.
            if final:
                slots.release()
            answers.put((answer, final))

        def ended() -> None:
            done.set()
            answers.put(_WAKE)
            slots.release()

        def read() -> None:
            try:
                for message in request_iterator:
                    slots.acquire()
                    if done.is_set() or self._draining.is_set():
                        return
                    answers.put(_STARTED)
                    try:
                        self._pool.submit(self._stream_request, message, done.is_set, emit)
                    except RuntimeError:
                        emit(stream_error(message, SHUTTING_DOWN), True)
                        return
            except Exception as error:
                # The call ended under the reader (cancelled, deadline, shutdown).
                log.debug("grpc: a stream's requests ended with %r", error)
            finally:
                answers.put(_READ_ALL)

        with self._lock:
            self._open_streams.add(answers)
        try:
            if not context.add_callback(ended):
                return
            try:
                self._readers.submit(read)
            except RuntimeError:
                self._fail(context, Unavailable(SHUTTING_DOWN))
            reading, in_flight = True, 0
            while (reading or in_flight) and not done.is_set():
                if self._draining.is_set():
                    reading = False
                    if not in_flight:
                        break
                item = answers.get()
                if item is _STARTED:
                    in_flight += 1
                elif item is _READ_ALL:
                    reading = False
                elif item is not _WAKE:
                    answer, final = item
                    if final:
                        in_flight -= 1
                    if answer is not None:
                        yield answer
        finally:
            done.set()
            slots.release()
            with self._lock:
                self._open_streams.discard(answers)
        if self._draining.is_set():
            self._fail(context, Unavailable(SHUTTING_DOWN))

    # -- repository extension ----------------------------------------------------

    def RepositoryIndex(self, request, context):
        self._admit("RepositoryIndex", context)
        entries = self._run(context, self._repository_control.repository_index, request.ready)
        return render.repository_index(entries)

    def RepositoryModelLoad(self, request, context):
        self._admit("RepositoryModelLoad", context)
        name, peer = request.model_name, peer_address(context.peer())
        decode = functools.partial(_load_parameters, request.parameters)
        load = functools.partial(self._repository_control.load_model, name)
        self._run(context, audited_load, "grpc", peer, name, decode, load)
        return pb.RepositoryModelLoadResponse()

    def RepositoryModelUnload(self, request, context):
        self._admit("RepositoryModelUnload", context)
        name, peer = request.model_name, peer_address(context.peer())
        work = functools.partial(self._unload, name, request.parameters)
        self._run(context, audited, "unload", "grpc", peer, name, work)
        return pb.RepositoryModelUnloadResponse()

    # -- system shared memory extension ---------------------------------------------

    def SystemSharedMemoryStatus(self, request, context):
        self._admit("SystemSharedMemoryStatus", context)
        regions = self._run(context, self._shared_memory.status, request.name)
        response = pb.SystemSharedMemoryStatusResponse()
        for region in regions:
            response.regions[region.name].CopyFrom(
                pb.SystemSharedMemoryStatusResponse.RegionStatus(
                    name=region.name,
                    key=region.key,
                    offset=region.offset,
                    byte_size=region.byte_size,
                )
            )
        return response

    def SystemSharedMemoryRegister(self, request, context):
        self._admit("SystemSharedMemoryRegister", context)
        self._run(
            context,
            self._shared_memory.register,
            request.name,
            request.key,
            request.offset,
            request.byte_size,
        )
        return pb.SystemSharedMemoryRegisterResponse()

    def SystemSharedMemoryUnregister(self, request, context):
        self._admit("SystemSharedMemoryUnregister", context)
        self._run(context, self._shared_memory.unregister, request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    # -- CUDA shared memory: no such region on this device ---------------------------

    def CudaSharedMemoryStatus(self, request, context):
        # No CUDA region can exist: the status of all is empty, as HTTP answers.
        if request.name:
            self._refuse_cuda_shm("CudaSharedMemoryStatus", context)
        self._admit("CudaSharedMemoryStatus", context)
        return pb.CudaSharedMemoryStatusResponse()

    def CudaSharedMemoryRegister(self, request, context):
        self._refuse_cuda_shm("CudaSharedMemoryRegister", context)

    def CudaSharedMemoryUnregister(self, request, context):
        # Nothing to unregister; NVIDIA's examples call this as a clean-up first.
        self._admit("CudaSharedMemoryUnregister", context)
        return pb.CudaSharedMemoryUnregisterResponse()

    def TraceSetting(self, request, context):
        self._admit("TraceSetting", context)
        changes = settings_codec.trace_changes(request)
        model = request.model_name
        if changes:
            verb, args = self._dataplane.update_trace_settings, (model, changes)
        else:
            verb, args = self._dataplane.trace_settings, (model,)
        return settings_codec.trace_response(self._run(context, verb, *args))

    def LogSettings(self, request, context):
        self._admit("LogSettings", context)
        changes = settings_codec.log_changes(request)
        if changes:
            settings = self._run(context, self._dataplane.update_log_settings, changes)
        else:
            settings = self._run(context, self._dataplane.log_settings)
        return settings_codec.log_response(settings)

    # -- on the worker pool --------------------------------------------------------

    def _model_ready(self, name: str, version: str) -> bool:
        """Triton answers ``ready: false`` for a model it does not know, where
        its HTTP frontend (and edgebox's) answers 400 ``Model version not ready``."""
        return self._dataplane.model_ready(name, version)

    def _infer(
        self, message: pb.ModelInferRequest, is_cancelled: Callable[[], bool]
    ) -> pb.ModelInferResponse:
        # Model first, as HTTP: an unknown model is NOT_FOUND whatever the inputs say.
        self._dataplane.check_servable(message.model_name, message.model_version)
        with self._shared_memory.lease() as regions:
            request = infer_codec.decode_request(message, regions)
            request.is_cancelled = is_cancelled
            return infer_codec.encode_response(
                self._dataplane.infer(request, from_client=True), request, regions
            )

    def _infer_raw(self, data: bytes, is_cancelled: Callable[[], bool]) -> bytes:
        message, raw = raw_messages.split_infer_request(data)
        self._dataplane.check_servable(message.model_name, message.model_version)
        with self._shared_memory.lease() as regions:
            request = infer_codec.decode_request(message, regions, raw)
            request.is_cancelled = is_cancelled
            answer, outputs = infer_codec.encode_response_parts(
                self._dataplane.infer(request, from_client=True), request, regions
            )
            return raw_messages.join_infer_response(answer, outputs)

    def _stream_request(
        self,
        message: pb.ModelInferRequest,
        is_cancelled: Callable[[], bool],
        emit: Emit,
    ) -> None:
        """Start one stream request; its answers go to ``emit`` as the model
        sends them, the last with ``final`` True. Never raises."""
        regions = RegionLease(self._shared_memory)
        try:
            self._dataplane.check_servable(message.model_name, message.model_version)
            request = infer_codec.decode_request(message, regions)
        except EdgeboxError as error:
            regions.release()
            emit(stream_error(message, str(error)), True)
            return
        except BaseException:
            regions.release()
            log.exception("grpc: ModelStreamInfer failed for model '%s'", message.model_name)
            emit(stream_error(message, INTERNAL_ERROR), True)
            return
        request.is_cancelled = is_cancelled
        empty_final = request.parameters.pop(EMPTY_FINAL_PARAMETER, False) is True
        sink = StreamSink(message, emit, empty_final, request, regions)
        self._dataplane.infer_stream(request, sink)

    def _unload(self, name: str, entries) -> None:
        parameters = _repository_parameters(entries)
        dependents = parameters.get("unload_dependents", False)
        if not isinstance(dependents, bool):
            raise InvalidArgument(f"unload '{name}': 'unload_dependents' must be true or false")
        self._repository_control.unload_model(name, dependents)

    # -- plumbing --------------------------------------------------------------------

    def _admit(self, method: str, context) -> None:
        """Ends the call with the refusal when the policy refuses it."""
        denial = self._policy.check(
            API_OF_METHOD[method],
            metadata_of(context.invocation_metadata()),
            peer_address(context.peer()),
        )
        if denial is not None:
            code, details = refusal(denial)
            context.abort(code, details)

    def _run(self, context, work: Callable[..., T], *args: Any, work_slot: bool = False) -> T:
        """``work(*args)``; an EdgeboxError ends the call with its mapped
        status and message, anything else with INTERNAL. ``work_slot``: wait
        for one of the ``work_slots`` first (a model call, not a lookup)."""
        try:
            if not work_slot:
                return work(*args)
            with self._work:
                return work(*args)
        except EdgeboxError as error:
            self._fail(context, error)
        except Exception:
            log.exception("grpc: %s failed", getattr(work, "__name__", work))
            context.abort(grpc.StatusCode.INTERNAL, INTERNAL_ERROR)
        raise AssertionError("context.abort returned")

    def _fail(self, context, error: EdgeboxError) -> None:
        if isinstance(error, DecoupledUnary):
            error = Unsupported(UNARY_REFUSAL_GRPC)
        code, details = status_of(error)
        context.abort(code, details)

    def _refuse_cuda_shm(self, method: str, context) -> None:
        self._admit(method, context)
        self._fail(
            context,
            Unsupported(
                f"{method}: CUDA shared memory is not supported on this device (Jetson has "
                "no CUDA IPC); send tensors in raw_input_contents"
            ),
        )


def _left(context) -> Callable[[], bool]:
    """True once the call has ended without its answer (the client cancelled
    or its deadline passed): a request still queued for its model is dropped."""
    return lambda: not context.is_active()


def _load_parameters(entries) -> dict:
    """A load's parameters, each of the type Triton's gRPC frontend requires:
    ``config`` a string_param, every ``file:`` a bytes_param (its texts)."""
    parameters = _repository_parameters(entries)
    for key, parameter in entries.items():
        choice = parameter.WhichOneof("parameter_choice")
        expected = (
            "string_param" if key == "config" else "bytes_param" if is_file_parameter(key) else None
        )
        if expected is not None and choice != expected:
            raise InvalidArgument(
                f"invalid value type for load parameter '{key}', expected {expected}."
            )
    return parameters


def _repository_parameters(entries) -> dict:
    """A ``map<string, ModelRepositoryParameter>`` as a plain dict."""
    values: dict = {}
    for key, parameter in entries.items():
        choice = parameter.WhichOneof("parameter_choice")
        values[key] = getattr(parameter, choice) if choice else None
    return values
