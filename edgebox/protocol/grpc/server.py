"""The gRPC listener: grpc's synchronous server, whose handler threads
(``grpc-worker``) run each unary call start to end, a pool of
``thread_count`` workers (``grpc-stream-worker``) for the requests streams
send, and a reader thread per open stream (``grpc-stream-reader``).

Synchronous because it is the cheaper path per call: ``grpc.aio`` plus a hop
to a worker thread for the model call cost about twice the server CPU
(bench/RESULTS.md, "gRPC per-call cost").

Limits like HTTP's: a request message larger than ``max_message_bytes`` is
refused (RESOURCE_EXHAUSTED) before it is parsed, one connection may have at
most ``max_concurrent_streams`` calls open (HTTP/2's setting: the client's
further calls wait on its side), and at most ``thread_count`` unary requests
are worked on at once (the rest wait, as HTTP's complete requests do). An
open ``ModelStreamInfer`` holds a handler thread and a reader thread, idle or
not: at most ``max_streams`` are open (``max_streams_per_client`` from one
address), and the handler pool has ``thread_count`` threads beyond them, so
idle streams never leave another call waiting for a thread. SO_REUSEPORT is
off, so a port in use is an error at start rather than a second daemon
silently sharing it.

``stop`` drains: no new calls, open streams stop reading and answer what they
read, calls in flight get until the deadline, then are cancelled.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading

import grpc

from edgebox.dataplane import DataPlane
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.grpc.registration import add_inference_service
from edgebox.protocol.grpc.service import InferenceService
from edgebox.protocol.grpc.stream_slots import StreamSlots
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.repository_control import RepositoryControl

log = logging.getLogger("edgebox.grpc")


class GrpcServer:
    """Started and stopped by the daemon's main thread; grpc's own threads
    and the pools above do the rest."""

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
        max_streams: int = 128,
        max_streams_per_client: int = 32,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = 0
        self.max_message_bytes = max_message_bytes
        self.max_concurrent_streams = max_concurrent_streams
        workers = max(1, thread_count)
        slots = StreamSlots(max_streams, max_streams_per_client)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="grpc-stream-worker"
        )
        self._readers = concurrent.futures.ThreadPoolExecutor(
            max_workers=slots.total, thread_name_prefix="grpc-stream-reader"
        )
        # Streams past their bound are refused on a handler thread, so one
        # more than the bound may hold a thread for a moment.
        self._handlers = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers + slots.total + 1, thread_name_prefix="grpc-worker"
        )
        self.service = InferenceService(
            dataplane,
            repository_control,
            policy,
            self._pool,
            workers,
            shared_memory=shared_memory,
            work_slots=workers,
            stream_slots=slots,
            readers=self._readers,
        )
        self._server: grpc.Server | None = None
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
        add_inference_service(self.service, server)
        try:
            port = server.add_insecure_port(self.address)
        except RuntimeError as exc:
            raise OSError(f"gRPC: cannot listen on {self.address}: {exc}") from None
        if port == 0:
            raise OSError(f"gRPC: cannot listen on {self.address}")
        server.start()
        self._server = server
        self.port = port
        return port

    @property
    def accepting(self) -> bool:
        """False once a stop has begun (or before the start)."""
        return self._server is not None and self._stopped is None

    def begin_stop(self, grace_s: float) -> None:
        """Refuse new calls and start draining; returns at once. Calls still
        running ``grace_s`` from now are cancelled."""
        if self._server is None or self._stopped is not None:
            return
        self.service.begin_drain()
        self._stopped = self._server.stop(grace_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        """``begin_stop`` if not begun, then wait (at most ``timeout_s``) for
        the server to end; a model call still running is left to finish on
        its worker, its answer unsent."""
        self.begin_stop(timeout_s)
        if self._stopped is not None and not self._stopped.wait(timeout_s + 1.0):
            log.warning("grpc: the server did not stop within %.1f s", timeout_s)
        for pool in (self._pool, self._readers, self._handlers):
            pool.shutdown(wait=False, cancel_futures=True)
