"""The KServe v2 gRPC service as the daemon runs it, built from its settings:
``GrpcServer`` with the limits the settings give, serving the same dataplane,
repository control and shared-memory registry as HTTP. The composition root
hands in the parts and gets back a server to start and stop.
"""

from __future__ import annotations

from typing import Protocol

from edgebox.dataplane import DataPlane
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.grpc.server import GrpcServer
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.repository_control import RepositoryControl


class GrpcSettings(Protocol):
    """The settings the gRPC service reads (``edgebox.settings.Settings``
    has them all, under these names)."""

    host: str
    grpc_port: int
    max_request_bytes: int
    grpc_thread_count: int
    grpc_max_concurrent_streams: int
    grpc_max_streams: int
    grpc_max_streams_per_client: int


def grpc_server(
    settings: GrpcSettings,
    dataplane: DataPlane,
    repository_control: RepositoryControl,
    shared_memory: SharedMemoryRegistry,
    access: AccessPolicy,
) -> GrpcServer:
    """Not started: the daemon binds it when it starts serving. A request
    message is held to ``max_request_bytes``, as an HTTP body is."""
    return GrpcServer(
        dataplane,
        repository_control,
        access,
        settings.host,
        settings.grpc_port,
        max_message_bytes=settings.max_request_bytes,
        thread_count=settings.grpc_thread_count,
        max_concurrent_streams=settings.grpc_max_concurrent_streams,
        shared_memory=shared_memory,
        max_streams=settings.grpc_max_streams,
        max_streams_per_client=settings.grpc_max_streams_per_client,
    )
