"""The gRPC listener: ``grpc``'s synchronous server, whose handler threads
(``grpc-worker``) run each unary call start to end, and an event loop of its
own thread (``grpc-loop``) for ``ModelStreamInfer``'s coroutine.

Synchronous because it is the cheaper path per call: ``grpc.aio`` plus a hop
to a worker for the model call cost about twice the daemon CPU of the
synchronous server at one client (bench/RESULTS.md, "gRPC per-call cost").

Limits like HTTP's: a request message larger than ``max_message_bytes`` is
refused (RESOURCE_EXHAUSTED) before it is parsed, one connection may have at
most ``max_concurrent_streams`` calls open (HTTP/2's setting: the client's
further calls wait on its side), and at most ``thread_count`` requests are
worked on at once (the rest wait for a worker, as HTTP's complete requests
do). An open stream holds a handler thread while open, so the handler pool
has ``thread_count + max_concurrent_streams`` threads (made as needed).
SO_REUSEPORT is off, so a port in use is an error at start rather than a
second daemon silently sharing it.

``stop`` drains: no new calls, open streams stop reading and answer what they
read, calls in flight get until the deadline, then are cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import threading
from collections.abc import Iterator

import grpc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from edgebox.dataplane import DataPlane
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.grpc.service import InferenceService
from edgebox.protocol.shared_memory import SharedMemoryRegistry

log = logging.getLogger("edgebox.grpc")


class GrpcServer:
    """Started and stopped by the daemon's main thread; the service's unary
    calls run on grpc's handler threads, its stream coroutine on the loop."""

    def __init__(
        self,
        dataplane: DataPlane,
        policy: AccessPolicy,
        host: str,
        port: int,
        max_message_bytes: int = 64 * 1024 * 1024,
        thread_count: int = 32,
        max_concurrent_streams: int = 128,
        shared_memory: SharedMemoryRegistry | None = None,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = 0
        self.max_message_bytes = max_message_bytes
        self.max_concurrent_streams = max_concurrent_streams
        workers = max(1, thread_count)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="grpc-stream-worker"
        )
        self._handlers = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers + max(1, max_concurrent_streams), thread_name_prefix="grpc-worker"
        )
        self.service = InferenceService(
            dataplane,
            policy,
            self._pool,
            workers,
            shared_memory=shared_memory,
            work_slots=threading.BoundedSemaphore(workers),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: grpc.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopped: threading.Event | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.requested_port}"

    def start(self) -> int:
        """Bind and start serving; returns the bound port (useful with port
        0). OSError when the address cannot be bound."""
        server = grpc.server(
            self._handlers,
            options=[
                ("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.max_concurrent_streams", self.max_concurrent_streams),
                ("grpc.so_reuseport", 0),
            ],
        )
        loop = asyncio.new_event_loop()
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(
            _Servicer(self.service, loop), server
        )
        try:
            port = server.add_insecure_port(self.address)
        except RuntimeError as exc:
            loop.close()
            raise OSError(f"gRPC: cannot listen on {self.address}: {exc}") from None
        if port == 0:
            loop.close()
            raise OSError(f"gRPC: cannot listen on {self.address}")
        self._loop = loop
        self._thread = threading.Thread(target=self._run_loop, name="grpc-loop", daemon=True)
        self._thread.start()
        server.start()
        self._server = server
        self.port = port
        return port

    @property
    def accepting(self) -> bool:
        """False once the loop thread has ended."""
        return self._thread is not None and self._thread.is_alive()

    def begin_stop(self, grace_s: float) -> None:
        """Refuse new calls and start draining; returns at once. Calls still
        running ``grace_s`` from now are cancelled."""
        if self._server is None or self._stopped is not None:
            return
        try:
            self._loop.call_soon_threadsafe(self.service.begin_drain)
        except RuntimeError:
            log.debug("grpc: the stream loop had already ended")
        self._stopped = self._server.stop(grace_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        """``begin_stop`` if not begun, then wait (at most ``timeout_s``) for
        the server to end; a model call still running is left to finish on
        its worker, its answer unsent."""
        self.begin_stop(timeout_s)
        if self._stopped is not None and not self._stopped.wait(timeout_s + 1.0):
            log.warning("grpc: the server did not stop within %.1f s", timeout_s)
        if self._thread is not None:
            try:
                self._loop.call_soon_threadsafe(self._loop.stop)
            except RuntimeError:
                pass
            self._thread.join(timeout_s + 1.0)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._handlers.shutdown(wait=False, cancel_futures=True)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        except BaseException:
            log.exception("grpc: the stream loop failed")
        finally:
            self._loop.close()


class _Servicer:
    """What grpc's synchronous server calls: the service's plain methods as
    they are, its unary coroutines run on ``loop``, and ``ModelStreamInfer``'s
    async generator driven on ``loop``, one response per step, from the
    handler thread grpc gave the stream."""

    def __init__(self, service: InferenceService, loop: asyncio.AbstractEventLoop) -> None:
        self._service = service
        self._loop = loop

    def __getattr__(self, name: str):
        method = getattr(self._service, name)
        if not inspect.iscoroutinefunction(method):
            return method
        return functools.partial(self._on_loop, method)

    def _on_loop(self, method, request, context):
        """A unary coroutine method, run on the loop; this handler thread
        waits for its answer."""
        answer = asyncio.run_coroutine_threadsafe(method(request, context), self._loop)
        context.add_callback(answer.cancel)
        try:
            return answer.result()
        except concurrent.futures.CancelledError:
            context.abort(grpc.StatusCode.CANCELLED, "the call ended before its answer")

    def ModelStreamInfer(
        self, request_iterator: Iterator[pb.ModelInferRequest], context
    ) -> Iterator[pb.ModelStreamInferResponse]:
        loop = self._loop
        requests = _Requests(request_iterator, loop)
        answers = self._service.ModelStreamInfer(requests, context)
        step: list[concurrent.futures.Future] = []

        def client_left() -> None:
            # Any thread, once the call has ended (answered, cancelled or past its deadline).
            requests.close()
            if step:
                step[-1].cancel()

        if not context.add_callback(client_left):
            return
        try:
            while True:
                step.append(asyncio.run_coroutine_threadsafe(_next(answers), loop))
                if len(step) > 1:
                    del step[0]
                try:
                    more, answer = step[-1].result()
                except concurrent.futures.CancelledError:
                    return
                if not more:
                    return
                yield answer
        finally:
            requests.close()
            if not loop.is_closed():
                asyncio.run_coroutine_threadsafe(answers.aclose(), loop)


async def _next(answers) -> tuple[bool, object]:
    """One step of an async generator, as (more, item)."""
    try:
        return True, await answers.__anext__()
    except StopAsyncIteration:
        return False, None


_END = object()


class _Requests:
    """A stream's incoming messages (grpc's blocking iterator) as an async
    iterator on ``loop``: a daemon thread reads one message ahead, so a
    stream's requests wait in the client's HTTP/2 window as before."""

    def __init__(self, iterator: Iterator[pb.ModelInferRequest], loop) -> None:
        self._iterator = iterator
        self._loop = loop
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=1)
        self._closed = threading.Event()
        self._put: concurrent.futures.Future | None = None
        self._thread: threading.Thread | None = None

    def __aiter__(self) -> _Requests:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._read, name="grpc-stream-reader", daemon=True
            )
            self._thread.start()
        return self

    async def __anext__(self) -> pb.ModelInferRequest:
        message = await self._queue.get()
        if message is _END:
            raise StopAsyncIteration
        return message

    def close(self) -> None:
        """Any thread: stop handing on messages."""
        self._closed.set()
        put = self._put
        if put is not None:
            put.cancel()

    def _read(self) -> None:
        try:
            for message in self._iterator:
                if not self._hand_on(message):
                    return
        except Exception as exc:  # the call ended under the reader
            log.debug("grpc: a stream's requests ended with %r", exc)
        self._hand_on(_END)

    def _hand_on(self, item) -> bool:
        if self._closed.is_set():
            return False
        try:
            self._put = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
            self._put.result()
        except (RuntimeError, concurrent.futures.CancelledError):
            return False
        return True
