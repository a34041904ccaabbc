"""Access control on the gRPC endpoint: the API each RPC belongs to, the
client's address out of gRPC's peer string, and how a refusal looks.

The categories are Triton's for ``--grpc-restricted-protocol``. A group's
refusal is what Triton 2.51 answers (``UNAVAILABLE``, "This protocol is
restricted, expecting header 'triton-grpc-protocol-<key>'"); the appliance's
loopback-only default, which Triton has not, is ``PERMISSION_DENIED``.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/customization_guide/inference_protocols.md#limit-endpoint-access-beta
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote

import grpc

from edgebox.protocol.access_policy import (
    API_KEY_HEADER,
    AccessPolicy,
    Denial,
    parse_restrictions,
    read_api_key,
)

HEADER_PREFIX = "triton-grpc-protocol-"
"""Put before a group's key: Triton's gRPC frontend reads that metadata."""

API_OF_METHOD = {
    "ServerLive": "health",
    "ServerReady": "health",
    "ModelReady": "health",
    "ServerMetadata": "metadata",
    "ModelMetadata": "metadata",
    "ModelInfer": "inference",
    "ModelStreamInfer": "inference",
    "ModelConfig": "model-config",
    "ModelStatistics": "statistics",
    "RepositoryIndex": "model-repository",
    "RepositoryModelLoad": "model-repository",
    "RepositoryModelUnload": "model-repository",
    "SystemSharedMemoryStatus": "shared-memory",
    "SystemSharedMemoryRegister": "shared-memory",
    "SystemSharedMemoryUnregister": "shared-memory",
    "CudaSharedMemoryStatus": "shared-memory",
    "CudaSharedMemoryRegister": "shared-memory",
    "CudaSharedMemoryUnregister": "shared-memory",
    "TraceSetting": "trace",
    "LogSettings": "logging",
}
"""Every RPC of ``inference.GRPCInferenceService`` -> its API."""


def grpc_policy(specs: Iterable[str], api_key_file: Path | None) -> AccessPolicy:
    """The policy for gRPC calls, from already-validated settings."""
    api_key = read_api_key(api_key_file) if api_key_file is not None else None
    return AccessPolicy(parse_restrictions(specs), api_key, header_prefix=HEADER_PREFIX)


def peer_address(peer: str) -> str:
    """The IP address in a gRPC peer string (``ipv4:127.0.0.1:5555``,
    ``ipv6:[::1]:5555``, brackets maybe percent-encoded); "" for anything
    else, which no loopback-only API is served to."""
    kind, _, rest = unquote(peer).partition(":")
    if kind not in ("ipv4", "ipv6"):
        return ""
    host = rest.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def metadata_of(pairs) -> dict[str, str]:
    """Invocation metadata as lower-cased names -> text values; the first of
    repeated keys counts, binary (``-bin``) values are left out."""
    headers: dict[str, str] = {}
    for key, value in pairs or ():
        if isinstance(value, str):
            headers.setdefault(key.lower(), value)
    return headers


def refusal(denial: Denial) -> tuple[grpc.StatusCode, str]:
    """The status and details a refused call ends with."""
    if denial.header is not None:
        return (
            grpc.StatusCode.UNAVAILABLE,
            f"This protocol is restricted, expecting header '{denial.header}'",
        )
    return (
        grpc.StatusCode.PERMISSION_DENIED,
        f"API '{denial.api}' is only served to clients on this machine (loopback); "
        f"to allow other clients set 'api_key_file' (they send the key in metadata "
        f"'{API_KEY_HEADER}') or restrict it with --grpc-restricted-protocol="
        f"{denial.api}:<key>=<value>",
    )
