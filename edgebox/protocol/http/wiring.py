"""The KServe v2 HTTP service as the daemon runs it, built from its settings:
the routes (``V2Handlers``) behind access control (``HttpAccessControl``),
served by ``HttpServer`` with the limits the settings give. The composition
root hands in the parts and gets back a server to start and stop; which
handler sits in front of which, and what the server aligns, stay here.
"""

from __future__ import annotations

from typing import Protocol

from edgebox.dataplane import DataPlane
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.http.access import HttpAccessControl
from edgebox.protocol.http.infer_codec import HEADER_LENGTH
from edgebox.protocol.http.server import HttpServer
from edgebox.protocol.http.v2_handlers import V2Handlers
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.repository_control import RepositoryControl


class HttpSettings(Protocol):
    """The settings the HTTP service reads (``edgebox.settings.Settings``
    has them all, under these names)."""

    host: str
    http_port: int
    max_request_bytes: int
    http_max_connections: int
    http_max_connections_per_client: int
    http_thread_count: int
    http_min_transfer_bytes_per_s: int
    http_max_body_bytes_in_flight: int


def http_server(
    settings: HttpSettings,
    dataplane: DataPlane,
    repository_control: RepositoryControl,
    shared_memory: SharedMemoryRegistry,
    access: AccessPolicy,
) -> HttpServer:
    """Not started: the daemon binds it when it starts serving.
    ``shared_memory`` is the daemon's, shared with gRPC; ``access`` is the
    policy the daemon logs at start."""
    handlers = V2Handlers(
        dataplane,
        repository_control,
        max_request_bytes=settings.max_request_bytes,
        shared_memory=shared_memory,
    )
    return HttpServer(
        HttpAccessControl(handlers, access),
        settings.host,
        settings.http_port,
        max_request_bytes=settings.max_request_bytes,
        max_connections=settings.http_max_connections,
        max_connections_per_client=settings.http_max_connections_per_client,
        thread_count=settings.http_thread_count,
        min_transfer_bytes_per_s=settings.http_min_transfer_bytes_per_s,
        max_body_bytes_in_flight=settings.http_max_body_bytes_in_flight or None,
        align_body_at=_binary_part_offset,
    )


def _binary_part_offset(headers: dict[str, str]) -> int:
    """Where a binary-extension body's tensors start, so the server aligns
    them rather than the JSON header before them."""
    return int(headers.get(HEADER_LENGTH, 0))
