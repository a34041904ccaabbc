"""Triton's shared-memory extensions over HTTP::

    POST /v2/systemsharedmemory[/region/{name}]/register | /unregister
    GET  /v2/systemsharedmemory[/region/{name}]/status
    POST /v2/cudasharedmemory[/region/{name}]/unregister   200, nothing to do
    GET  /v2/cudasharedmemory/status                       200, ``[]``
    *    /v2/cudasharedmemory/...   (register, a named status) 400: no CUDA IPC here

``register`` needs the region name in the path and ``{"key", "offset",
"byte_size"}`` in the body; without a name, ``unregister`` and ``status`` act
on every region. No CUDA region can exist, so unregistering one and listing
them all answer as Triton does with none registered: NVIDIA's examples call
``unregister_cuda_shared_memory()`` as a clean-up before they start. Spec:
https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_shared_memory.md
"""

from __future__ import annotations

import json

from edgebox.errors import InvalidArgument, Unsupported
from edgebox.protocol.http.messages import HttpRequest, HttpResponse
from edgebox.protocol.http.request_json import parse_object
from edgebox.protocol.shared_memory import SharedMemoryRegistry

CUDA_UNSUPPORTED = (
    "CUDA shared memory is not supported on this device (Jetson has no CUDA IPC); "
    "use system shared memory or send tensors in the request"
)


def route(
    registry: SharedMemoryRegistry, request: HttpRequest, method: str, parts: list[str]
) -> HttpResponse | None:
    """The answer for ``parts`` (the path after ``/v2/``), or None when no
    shared-memory route matches (the caller answers 404 / 405)."""
    if parts[0] == "cudasharedmemory":
        return _cuda(method, parts)
    name = ""
    rest = parts[1:]
    if len(rest) == 3 and rest[0] == "region":
        name, rest = rest[1], rest[2:]
    if len(rest) != 1:
        return None
    action = rest[0]
    if action == "status" and method == "GET":
        return _json(
            [
                {"name": s.name, "key": s.key, "offset": s.offset, "byte_size": s.byte_size}
                for s in registry.status(name)
            ]
        )
    if action == "register" and method == "POST":
        if not name:
            raise InvalidArgument(
                "system shared memory: register needs the region name in the path "
                "(/v2/systemsharedmemory/region/{name}/register)"
            )
        where = f"system shared memory region '{name}'"
        body = parse_object(request.body, where) if len(request.body) else {}
        if "key" not in body or "byte_size" not in body:
            raise InvalidArgument(f"{where}: register needs 'key' and 'byte_size'")
        registry.register(name, body["key"], body.get("offset", 0), body["byte_size"])
        return HttpResponse(200, [])
    if action == "unregister" and method == "POST":
        registry.unregister(name)
        return HttpResponse(200, [])
    return None


def _cuda(method: str, parts: list[str]) -> HttpResponse:
    """Unregister (all or one) and the status of all: nothing is registered; the rest
    is refused, since a CUDA IPC handle cannot be opened on this device."""
    if method == "POST" and parts[-1] == "unregister" and len(parts) in (2, 4):
        return HttpResponse(200, [])
    if method == "GET" and parts[1:] == ["status"]:
        return _json([])
    raise Unsupported(CUDA_UNSUPPORTED)


def _json(document) -> HttpResponse:
    return HttpResponse(200, [json.dumps(document).encode()])
