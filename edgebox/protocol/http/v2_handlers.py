"""The KServe v2 HTTP endpoints and Triton's extensions, mapped onto dataplane
verbs and, for the repository extension, ``RepositoryControl``'s. Routing is
by path segments; nothing here knows about models beyond what those answer,
and ``render`` turns their typed answers into JSON.

Routes (``{v}`` optional everywhere it appears, as ``/versions/{v}``)::

    GET  /v2                               server metadata
    GET  /v2/health/live | /v2/health/ready
    GET  /v2/models/{m}[/versions/{v}]     model metadata
    GET  .../ready | .../config | .../stats
    POST .../infer
    POST .../generate | .../generate_stream   Triton's generate extension (SSE)
    GET  /v2/models/stats                  statistics of every model
    POST /v2/repository/index
    POST /v2/repository/models/{m}/load | /unload
    GET  /v2/repository/rollouts           edgebox's rollouts in progress
    GET  /v2/repository/models/{m}/rollout
    POST /v2/repository/models/{m}/rollout/promote | /abort | /release
    POST /v2/systemsharedmemory[/region/{r}]/register | /unregister
    GET  /v2/systemsharedmemory[/region/{r}]/status
    GET|POST /v2/logging                   Triton's logging extension
    GET|POST /v2/trace/setting | /v2/models/{m}/trace/setting   trace (always OFF)
    *    /v2/cudasharedmemory/...          400: not on this device
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from http import HTTPStatus

from edgebox.dataplane import DataPlane
from edgebox.errors import EdgeboxError, InvalidArgument, NotFound
from edgebox.protocol.http import (
    generate_ext,
    infer_codec,
    render,
    repository_ext,
    rollout_ext,
    shared_memory_ext,
)
from edgebox.protocol.http.error_map import error_response
from edgebox.protocol.http.messages import HttpRequest, HttpResponse, json_error_response
from edgebox.protocol.http.request_json import parse_object
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.repository_control import RepositoryControl
from edgebox.responses import UNARY_REFUSAL_HTTP, DecoupledUnary

_VERSION = re.compile(r"0|[1-9][0-9]*")
"""A version as a path segment: Triton routes only ``versions/[0-9]+`` and
version folders never start with 0, so a version has exactly one spelling."""

_INFLATE_CHUNK = 1 << 16
"""Compressed bytes handed to zlib at a time."""

_MAX_GZIP_MEMBERS = 64
"""gzip members one body may hold (clients send one)."""

_SERVER_ROUTES = frozenset(
    [
        "",
        "health/live",
        "health/ready",
        "models/stats",
        "repository/index",
        "logging",
        "trace/setting",
    ]
)
"""Paths after ``/v2/`` outside ``models/{m}``: a wrong method on them is 405, not 404."""


class V2Handlers:
    """The HTTP handler: called on connection threads, many at once.

    ``max_request_bytes`` is the HTTP server's body limit; a compressed body may
    inflate to no more than that either (413 past it). ``shared_memory`` holds
    the system shared-memory regions (the daemon's, shared with gRPC)."""

    def __init__(
        self,
        dataplane: DataPlane,
        repository_control: RepositoryControl,
        max_request_bytes: int = 64 * 1024 * 1024,
        shared_memory: SharedMemoryRegistry | None = None,
    ) -> None:
        self.dataplane = dataplane
        self.repository_control = repository_control
        self.max_request_bytes = max_request_bytes
        self.shared_memory = shared_memory or SharedMemoryRegistry()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self._route(request)
        except DecoupledUnary:
            return json_error_response(HTTPStatus.NOT_IMPLEMENTED, UNARY_REFUSAL_HTTP)
        except EdgeboxError as error:
            return error_response(error)
        except _BodyTooLarge as refusal:
            return json_error_response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(refusal))

    def _route(self, request: HttpRequest) -> HttpResponse:
        parts = request.path.strip("/").split("/")
        if not parts or parts[0] != "v2":
            return _not_found(request)
        method = request.method
        if method == "HEAD":
            method = "GET"
        if len(parts) >= 3 and parts[1] == "models" and parts[2] != "stats":
            return self._model_route(request, method, parts[2], parts[3:])
        route = "/".join(parts[1:])
        if len(parts) >= 2 and parts[1] in ("systemsharedmemory", "cudasharedmemory"):
            answer = shared_memory_ext.route(self.shared_memory, request, method, parts[1:])
            if answer is not None:
                return answer
            known = len(parts) in (3, 5) and parts[-1] in ("register", "unregister", "status")
            return _wrong_method(request) if known else _not_found(request)
        if route == "" and method == "GET":
            return _json(render.server_metadata(self.dataplane.server_metadata()))
        if route == "health/live" and method == "GET":
            return _status(self.dataplane.live())
        if route == "health/ready" and method == "GET":
            return _status(self.dataplane.ready())
        if route == "models/stats" and method == "GET":
            return _json(render.statistics(self.dataplane.statistics()))
        if route == "logging" and method in ("GET", "POST"):
            if method == "GET":
                return _json(self.dataplane.log_settings())
            changes = _settings_body(request, "log settings")
            return _json(self.dataplane.update_log_settings(changes))
        if route == "trace/setting" and method in ("GET", "POST"):
            return self._trace_setting(request, method, "")
        if route == "repository/index" and method == "POST":
            return repository_ext.index(self.repository_control, request)
        if len(parts) == 5 and parts[1:3] == ["repository", "models"] and method == "POST":
            if parts[4] == "load":
                return repository_ext.load(self.repository_control, request, parts[3])
            if parts[4] == "unload":
                return repository_ext.unload(self.repository_control, request, parts[3])
        answer = rollout_ext.route(self.repository_control, request, method, parts[1:])
        if answer is not None:
            return answer
        known = (
            route in _SERVER_ROUTES
            or rollout_ext.is_rollout_path(parts[1:])
            or (
                len(parts) == 5
                and parts[1:3] == ["repository", "models"]
                and parts[4] in ("load", "unload")
            )
        )
        return _wrong_method(request) if known else _not_found(request)

    def _model_route(
        self, request: HttpRequest, method: str, name: str, rest: list[str]
    ) -> HttpResponse:
        version = ""
        if len(rest) >= 2 and rest[0] == "versions":
            version = rest[1]
            rest = rest[2:]
            if not _VERSION.fullmatch(version):
                raise NotFound(
                    f"model '{name}': no version '{version}' (versions are written in digits, "
                    "without leading zeros)"
                )
        action = rest[0] if rest else ""
        if rest == ["trace", "setting"] and not version:
            if method not in ("GET", "POST"):
                return _wrong_method(request)
            return self._trace_setting(request, method, name)
        if len(rest) > 1:
            return _not_found(request)
        if action == "infer":
            if method != "POST":
                return _wrong_method(request)
            return self._infer(request, name, version)
        if action in ("generate", "generate_stream"):
            if method != "POST":
                return _wrong_method(request)
            stream = action == "generate_stream"
            return generate_ext.generate(self.dataplane, request, name, version, stream)
        if method != "GET":
            return _wrong_method(request)
        if action == "":
            return _json(render.model_metadata(self.dataplane.model_metadata(name, version)))
        if action == "ready":
            if self.dataplane.model_ready(name, version):
                return _status(True)
            # Triton's words and status for every model or version not ready, known or not.
            return json_error_response(HTTPStatus.BAD_REQUEST, "Model version not ready")
        if action == "config":
            return _json(render.model_config(self.dataplane.model_config(name, version)))
        if action == "stats":
            return _json(render.statistics(self.dataplane.statistics(name, version)))
        return _not_found(request)

    def _trace_setting(self, request: HttpRequest, method: str, model: str) -> HttpResponse:
        if method == "GET":
            return _json(self.dataplane.trace_settings(model))
        where = f"model '{model}' trace settings" if model else "trace settings"
        changes = _settings_body(request, where)
        return _json(self.dataplane.update_trace_settings(model, changes))

    def _infer(self, request: HttpRequest, name: str, version: str) -> HttpResponse:
        # Nothing in the body is read for a model that cannot run it.
        self.dataplane.check_servable(name, version)
        body = request.body
        encoding = request.headers.get("content-encoding")
        if encoding:
            body = _decompress(body, encoding, self.max_request_bytes)
        with self.shared_memory.lease() as regions:
            infer_request, binary_default = infer_codec.decode_request(
                body, request.headers, name, version, regions
            )
            infer_request.is_cancelled = request.client_gone
            response = self.dataplane.infer(infer_request, from_client=True)
            http_response = infer_codec.encode_response(
                response, infer_request, binary_default, regions
            )
        accepted = request.headers.get("accept-encoding")
        if accepted:
            _compress(http_response, accepted)
        return http_response


class _BodyTooLarge(Exception):
    """A body that inflates past ``max_request_bytes``: 413, as an oversized one is."""


def _decompress(body: memoryview, encoding: str, limit: int) -> memoryview:
    encoding = encoding.strip().lower()
    if encoding == "identity":
        return body
    if encoding not in ("gzip", "deflate"):
        raise InvalidArgument(f"unsupported Content-Encoding '{encoding}' (use gzip or deflate)")
    try:
        return memoryview(_inflate(body, encoding == "gzip", limit))
    except zlib.error as exc:
        raise InvalidArgument(f"request body is not valid {encoding} data: {exc}") from None


def _inflate(body: memoryview, gzipped: bool, limit: int) -> bytearray:
    """``body`` inflated, or _BodyTooLarge as soon as the output would pass
    ``limit``: zlib is never asked for more than one byte past it, so a small
    bomb cannot make the daemon allocate what it promises.

    A deflate body is one zlib stream; bytes after it are ignored, as
    ``zlib.decompress`` ignores them. A gzip body may hold up to
    ``_MAX_GZIP_MEMBERS`` members, each optionally followed by NUL padding, as
    ``gzip.decompress`` reads them; the cap bounds the per-member work a body
    of many tiny members would otherwise cost.
    """
    out = bytearray()
    position = 0
    for _ in range(_MAX_GZIP_MEMBERS if gzipped else 1):
        inflater = zlib.decompressobj(31 if gzipped else zlib.MAX_WBITS)
        while not inflater.eof:
            chunk = body[position : position + _INFLATE_CHUNK]
            if not chunk:
                raise zlib.error("it ends before the end of the stream")
            position += len(chunk)
            out += inflater.decompress(chunk, limit + 1 - len(out))
            if len(out) > limit:
                raise _BodyTooLarge(
                    f"request body inflates past the limit of {limit} bytes (--max-request-bytes)"
                )
        position -= len(inflater.unused_data)
        if gzipped:
            position = _skip_nul_padding(body, position)
        if not gzipped or position == len(body):
            return out
    raise zlib.error(f"it holds more than {_MAX_GZIP_MEMBERS} gzip members")


def _skip_nul_padding(body: memoryview, position: int) -> int:
    while position < len(body):
        chunk = body[position : position + _INFLATE_CHUNK].tobytes()
        rest = chunk.lstrip(b"\0")
        position += len(chunk) - len(rest)
        if rest:
            break
    return position


def _compress(response: HttpResponse, accepted: str) -> None:
    choices = [part.split(";")[0].strip().lower() for part in accepted.split(",")]
    for encoding in choices:
        if encoding in ("gzip", "deflate"):
            joined = b"".join(bytes(memoryview(b).cast("B")) for b in response.body)
            compressed = gzip.compress(joined) if encoding == "gzip" else zlib.compress(joined)
            response.body = [compressed]
            response.headers.append(("Content-Encoding", encoding))
            return


def _settings_body(request: HttpRequest, where: str) -> dict:
    """A settings POST's JSON object; an empty body changes nothing."""
    return parse_object(request.body, where) if len(request.body) else {}


def _json(document) -> HttpResponse:
    return HttpResponse(200, [json.dumps(document).encode()])


def _status(ok: bool) -> HttpResponse:
    return HttpResponse(200 if ok else HTTPStatus.SERVICE_UNAVAILABLE, [])


def _not_found(request: HttpRequest) -> HttpResponse:
    return json_error_response(HTTPStatus.NOT_FOUND, f"no endpoint {request.method} {request.path}")


def _wrong_method(request: HttpRequest) -> HttpResponse:
    return json_error_response(
        HTTPStatus.METHOD_NOT_ALLOWED, f"method {request.method} not allowed for {request.path}"
    )
