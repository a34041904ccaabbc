"""The gRPC listener: a ``grpc.aio`` server on an event loop of its own
thread (``grpc-loop``), and a pool of ``thread_count`` workers (``grpc-worker``)
for everything that may block.

Limits like HTTP's: a request message larger than ``max_message_bytes`` is
refused (RESOURCE_EXHAUSTED) before it is parsed, one connection may have at
most ``max_concurrent_streams`` calls open (HTTP/2's setting: the client's
further calls wait on its side), and at most ``thread_count`` requests are
worked on at once (the rest wait for a worker, as HTTP's complete requests
do). SO_REUSEPORT is off, so a port in use is an error at start rather than a
second daemon silently sharing it.

``stop`` drains: no new calls, open streams stop reading and answer what they
read, calls in flight get until the deadline, then are cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading

import grpc

from edgebox.dataplane import DataPlane
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.grpc.registration import add_inference_service
from edgebox.protocol.grpc.service import InferenceService
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.repository_control import RepositoryControl

log = logging.getLogger("edgebox.grpc")


class GrpcServer:
    """Started and stopped by the daemon's main thread; the service's
    coroutines run on the loop thread, its blocking work on the pool."""

    def __init__(
        self,
        dataplane: DataPlane,
        repository_control: RepositoryControl,
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
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, thread_count), thread_name_prefix="grpc-worker"
        )
        self.service = InferenceService(
            dataplane,
            repository_control,
            policy,
            self._pool,
            thread_count,
            shared_memory=shared_memory,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: grpc.aio.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping: concurrent.futures.Future | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.requested_port}"

    def start(self) -> int:
        """Bind and start serving; returns the bound port (useful with port
        0). OSError when the address cannot be bound."""
        started: concurrent.futures.Future = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run_loop, args=(started,), name="grpc-loop", daemon=True
        )
        self._thread.start()
        self.port = started.result()
        return self.port

    @property
    def accepting(self) -> bool:
        """False once the loop thread has ended."""
        return self._thread is not None and self._thread.is_alive()

    def begin_stop(self, grace_s: float) -> None:
        """Refuse new calls and start draining; returns at once. Calls still
        running ``grace_s`` from now are cancelled."""
        if self._loop is None or self._server is None or self._stopping is not None:
            return
        self._stopping = asyncio.run_coroutine_threadsafe(self._shut_down(grace_s), self._loop)

    def stop(self, timeout_s: float = 5.0) -> None:
        """``begin_stop`` if not begun, then wait (at most ``timeout_s``) for
        the server to end; a model call still running is left to finish on
        its worker, its answer unsent."""
        self.begin_stop(timeout_s)
        if self._stopping is not None:
            try:
                self._stopping.result(timeout_s + 1.0)
            except concurrent.futures.TimeoutError:
                log.warning("grpc: the server did not stop within %.1f s", timeout_s)
        if self._thread is not None:
            self._thread.join(timeout_s + 1.0)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- on the loop thread ---------------------------------------------------------

    def _run_loop(self, started: concurrent.futures.Future) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(started))
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            else:
                log.exception("grpc: the server loop failed")
        finally:
            loop.close()

    async def _serve(self, started: concurrent.futures.Future) -> None:
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.max_concurrent_streams", self.max_concurrent_streams),
                ("grpc.so_reuseport", 0),
            ]
        )
        add_inference_service(self.service, server)
        try:
            port = server.add_insecure_port(self.address)
        except RuntimeError as exc:
            raise OSError(f"gRPC: cannot listen on {self.address}: {exc}") from None
        if port == 0:
            raise OSError(f"gRPC: cannot listen on {self.address}")
        await server.start()
        self._loop = asyncio.get_running_loop()
        self._server = server
        self._stopped = asyncio.Event()
        started.set_result(port)
        # Until _shut_down has finished, not merely until the server says it
        # terminated: the loop must outlive the stop it is running.
        await self._stopped.wait()

    async def _shut_down(self, grace_s: float) -> None:
        try:
            self.service.begin_drain()
            await self._server.stop(grace_s)
        finally:
            self._stopped.set()
