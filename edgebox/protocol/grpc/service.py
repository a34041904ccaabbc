"""``inference.GRPCInferenceService``: each RPC checks access, then calls the
verb its HTTP route calls (the dataplane's, or ``RepositoryControl``'s for the
repository extension) and renders the result.

Runs on the gRPC server's event loop (``server.GrpcServer``). Anything that
may block (a model call, a load, a repository scan, a registry lookup) runs
on the worker pool, so an open stream or a slow load never holds the loop;
``live`` and ``ready`` read two flags and answer on the loop.

``ModelStreamInfer`` runs each request through ``DataPlane.infer_stream`` and
streams every response as the model sends it: one for an ordinary model, zero
or many for a decoupled one (each carrying ``triton_final_response``), or
``error_message`` with the text a unary call would carry, as Triton does. A
final that comes without a response is sent as an empty response only when
the client asked (``triton_enable_empty_final_response``). Up to
``stream_in_flight`` requests of one stream run at once, each until its final,
and are answered as they finish (a client matches them by ``id``), so a stream
can fill a dynamic batch. At shutdown a stream stops reading, answers what it
read, then ends UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable
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
from edgebox.protocol.shared_memory import RegionLease, SharedMemoryRegistry
from edgebox.repository.override_files import is_file_parameter
from edgebox.repository_control import RepositoryControl
from edgebox.responses import UNARY_REFUSAL_GRPC, DecoupledUnary

log = logging.getLogger("edgebox.grpc")

T = TypeVar("T")

SHUTTING_DOWN = "the server is shutting down; this stream takes no more requests"
"""How a stream open at shutdown ends (UNAVAILABLE), once the requests it
had sent are answered."""


class InferenceService(service_pb2_grpc.GRPCInferenceServiceServicer):
    """The servicer: its coroutines run on the server's event loop, their
    blocking work on ``pool`` (shared by every call)."""

    def __init__(
        self,
        dataplane: DataPlane,
        repository_control: RepositoryControl,
        policy: AccessPolicy,
        pool: Executor,
        stream_in_flight: int = 32,
        shared_memory: SharedMemoryRegistry | None = None,
    ) -> None:
        self._dataplane = dataplane
        self._repository_control = repository_control
        self._shared_memory = shared_memory or SharedMemoryRegistry()
        self._policy = policy
        self._pool = pool
        self._stream_in_flight = max(1, stream_in_flight)
        self._draining = asyncio.Event()

    def begin_drain(self) -> None:
        """Called on the event loop at shutdown: every open stream stops
        taking requests, answers those it has and ends with OK."""
        self._draining.set()

    # -- health and metadata ---------------------------------------------------

    async def ServerLive(self, request, context):
        await self._admit("ServerLive", context)
        return pb.ServerLiveResponse(live=self._dataplane.live())

    async def ServerReady(self, request, context):
        await self._admit("ServerReady", context)
        return pb.ServerReadyResponse(ready=self._dataplane.ready())

    async def ModelReady(self, request, context):
        await self._admit("ModelReady", context)
        ready = await self._run(context, self._model_ready, request.name, request.version)
        return pb.ModelReadyResponse(ready=ready)

    async def ServerMetadata(self, request, context):
        await self._admit("ServerMetadata", context)
        return render.server_metadata(self._dataplane.server_metadata())

    async def ModelMetadata(self, request, context):
        await self._admit("ModelMetadata", context)
        result = await self._run(
            context, self._dataplane.model_metadata, request.name, request.version
        )
        return render.model_metadata(result)

    async def ModelConfig(self, request, context):
        await self._admit("ModelConfig", context)
        config = await self._run(
            context, self._dataplane.model_config, request.name, request.version
        )
        return render.model_config(config)

    async def ModelStatistics(self, request, context):
        await self._admit("ModelStatistics", context)
        entries = await self._run(
            context, self._dataplane.statistics, request.name, request.version
        )
        return render.statistics(entries)

    # -- inference ---------------------------------------------------------------

    async def ModelInfer(self, request, context):
        await self._admit("ModelInfer", context)
        cancelled = threading.Event()
        try:
            return await self._run(context, self._infer, request, cancelled.is_set)
        except asyncio.CancelledError:
            # The client left: a request still queued for its model is dropped unrun.
            cancelled.set()
            raise

    async def ModelInferRaw(self, data: bytes, context) -> bytes:
        """``ModelInfer`` as the server registers it: the request's bytes in,
        the answer's bytes out, the tensors never copied by protobuf
        (``raw_messages``)."""
        await self._admit("ModelInfer", context)
        cancelled = threading.Event()
        try:
            return await self._run(context, self._infer_raw, data, cancelled.is_set)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def ModelStreamInfer(
        self, request_iterator: AsyncIterator[pb.ModelInferRequest], context
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        await self._admit("ModelStreamInfer", context)
        loop = asyncio.get_running_loop()
        answers: asyncio.Queue = asyncio.Queue()
        slots = asyncio.Semaphore(self._stream_in_flight)
        cancelled = threading.Event()
        in_flight = 0

        def emit(answer: pb.ModelStreamInferResponse | None, final: bool) -> None:
            # Any thread: a pool thread, a batcher worker, a decoupled model's own.
            try:
                loop.call_soon_threadsafe(answers.put_nowait, (answer, final))
            except RuntimeError:
                log.debug("grpc: a stream response came after the server stopped")

        async def read() -> None:
            nonlocal in_flight
            try:
                async for message in request_iterator:
                    await slots.acquire()
                    in_flight += 1
                    loop.run_in_executor(
                        self._pool, self._stream_request, message, cancelled.is_set, emit
                    )
            finally:
                answers.put_nowait(None)

        reader = asyncio.ensure_future(read())
        drain = asyncio.ensure_future(self._draining.wait())
        drain.add_done_callback(lambda _: reader.cancel())
        try:
            reading = True
            while reading or in_flight:
                item = await answers.get()
                if item is None:
                    reading = False
                    continue
                answer, final = item
                if final:
                    in_flight -= 1
                    slots.release()
                if answer is not None:
                    yield answer
        finally:
            cancelled.set()
            drain.cancel()
            reader.cancel()
        if self._draining.is_set():
            await self._fail(context, Unavailable(SHUTTING_DOWN))
        if not reader.cancelled() and reader.exception() is not None:
            log.debug("grpc: a stream's requests ended with %r", reader.exception())

    # -- repository extension ----------------------------------------------------

    async def RepositoryIndex(self, request, context):
        await self._admit("RepositoryIndex", context)
        entries = await self._run(context, self._repository_control.repository_index, request.ready)
        return render.repository_index(entries)

    async def RepositoryModelLoad(self, request, context):
        await self._admit("RepositoryModelLoad", context)
        name, peer = request.model_name, peer_address(context.peer())
        decode = functools.partial(_load_parameters, request.parameters)
        load = functools.partial(self._repository_control.load_model, name)
        await self._run(context, audited_load, "grpc", peer, name, decode, load)
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request, context):
        await self._admit("RepositoryModelUnload", context)
        name, peer = request.model_name, peer_address(context.peer())
        work = functools.partial(self._unload, name, request.parameters)
        await self._run(context, audited, "unload", "grpc", peer, name, work)
        return pb.RepositoryModelUnloadResponse()

    # -- system shared memory extension ---------------------------------------------

    async def SystemSharedMemoryStatus(self, request, context):
        await self._admit("SystemSharedMemoryStatus", context)
        regions = await self._run(context, self._shared_memory.status, request.name)
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

    async def SystemSharedMemoryRegister(self, request, context):
        await self._admit("SystemSharedMemoryRegister", context)
        await self._run(
            context,
            self._shared_memory.register,
            request.name,
            request.key,
            request.offset,
            request.byte_size,
        )
        return pb.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request, context):
        await self._admit("SystemSharedMemoryUnregister", context)
        await self._run(context, self._shared_memory.unregister, request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    # -- CUDA shared memory: no such region on this device ---------------------------

    async def CudaSharedMemoryStatus(self, request, context):
        # No CUDA region can exist: the status of all is empty, as HTTP answers.
        if request.name:
            await self._refuse_cuda_shm("CudaSharedMemoryStatus", context)
        await self._admit("CudaSharedMemoryStatus", context)
        return pb.CudaSharedMemoryStatusResponse()

    async def CudaSharedMemoryRegister(self, request, context):
        await self._refuse_cuda_shm("CudaSharedMemoryRegister", context)

    async def CudaSharedMemoryUnregister(self, request, context):
        # Nothing to unregister; NVIDIA's examples call this as a clean-up first.
        await self._admit("CudaSharedMemoryUnregister", context)
        return pb.CudaSharedMemoryUnregisterResponse()

    async def TraceSetting(self, request, context):
        await self._admit("TraceSetting", context)
        changes = settings_codec.trace_changes(request)
        model = request.model_name
        if changes:
            verb, args = self._dataplane.update_trace_settings, (model, changes)
        else:
            verb, args = self._dataplane.trace_settings, (model,)
        return settings_codec.trace_response(await self._run(context, verb, *args))

    async def LogSettings(self, request, context):
        await self._admit("LogSettings", context)
        changes = settings_codec.log_changes(request)
        if changes:
            settings = await self._run(context, self._dataplane.update_log_settings, changes)
        else:
            settings = await self._run(context, self._dataplane.log_settings)
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

    async def _admit(self, method: str, context) -> None:
        """Ends the call with the refusal when the policy refuses it."""
        denial = self._policy.check(
            API_OF_METHOD[method],
            metadata_of(context.invocation_metadata()),
            peer_address(context.peer()),
        )
        if denial is not None:
            code, details = refusal(denial)
            await context.abort(code, details)

    async def _run(self, context, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` on the pool; an EdgeboxError ends the call with its
        mapped status and message, anything else with INTERNAL."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, work, *args)
        except EdgeboxError as error:
            await self._fail(context, error)
        except asyncio.CancelledError:
            raise
        except BaseException:
            log.exception("grpc: %s failed", getattr(work, "__name__", work))
            await context.abort(grpc.StatusCode.INTERNAL, INTERNAL_ERROR)
        raise AssertionError("context.abort returned")

    async def _fail(self, context, error: EdgeboxError) -> None:
        if isinstance(error, DecoupledUnary):
            error = Unsupported(UNARY_REFUSAL_GRPC)
        code, details = status_of(error)
        await context.abort(code, details)

    async def _refuse_cuda_shm(self, method: str, context) -> None:
        await self._admit(method, context)
        await self._fail(
            context,
            Unsupported(
                f"{method}: CUDA shared memory is not supported on this device (Jetson has "
                "no CUDA IPC); send tensors in raw_input_contents"
            ),
        )


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
