"""Access control on the HTTP endpoint: classifies each request path into
Triton's API categories and answers 403 with ``{"error": ...}`` in place of
the handler when ``access_policy.AccessPolicy`` refuses it.

The categories follow what Triton 2.51 does with ``--http-restricted-api``
(``/v2/models/{m}/config`` is ``model-config``, ``.../ready`` is ``health``,
``/v2`` and ``/v2/models/{m}`` are ``metadata``, ...). Two deliberate
differences, both so that a restriction cannot be sidestepped:

- paths are split exactly as ``V2Handlers`` splits them (slashes at the ends
  stripped), so every path the handler serves has the category it is served as;
- every path under ``/v2/repository``, ``/v2/logging``, ``/v2/trace``,
  ``/v2/{system,cuda}sharedmemory`` and ``/v2/models/{m}/trace`` belongs to that
  API, even one no endpoint answers (Triton: 404): an endpoint added later is
  covered from its first day.

The method plays no part, as in Triton (a wrong method on a restricted path is
refused before it would be a 405).
"""

from __future__ import annotations

from http import HTTPStatus

from edgebox.protocol.access_policy import API_KEY_HEADER, AccessPolicy, Denial
from edgebox.protocol.http.messages import Handler, HttpRequest, HttpResponse, json_error_response

_PREFIX_APIS = {
    "repository": "model-repository",
    "logging": "logging",
    "trace": "trace",
    "systemsharedmemory": "shared-memory",
    "cudasharedmemory": "shared-memory",
}
"""First segment after ``/v2`` -> the API of everything below it."""

_MODEL_ACTIONS = {
    "ready": "health",
    "config": "model-config",
    "stats": "statistics",
    "infer": "inference",
    "generate": "inference",
    "generate_stream": "inference",
}
"""Last segment of ``/v2/models/{m}[/versions/{v}]/{action}`` -> its API."""


def api_of(path: str) -> str | None:
    """The API a (percent-decoded) request path belongs to; None for a path
    outside every API, which the router answers with 404."""
    parts = path.strip("/").split("/")
    if parts[0] != "v2":
        return None
    rest = parts[1:]
    if not rest:
        return "metadata"
    if rest[0] in _PREFIX_APIS:
        return _PREFIX_APIS[rest[0]]
    if rest in (["health", "live"], ["health", "ready"]):
        return "health"
    if rest[0] != "models" or len(rest) < 2:
        return None
    if rest[1:] == ["stats"]:
        return "statistics"
    model_rest = rest[2:]
    if len(model_rest) >= 2 and model_rest[0] == "versions":
        model_rest = model_rest[2:]
    if not model_rest:
        return "metadata"
    if model_rest[0] == "trace":
        return "trace"
    if len(model_rest) > 1:
        return None
    return _MODEL_ACTIONS.get(model_rest[0])


class HttpAccessControl:
    """The HTTP handler in front of ``V2Handlers``: called on connection
    threads, many at once; holds nothing mutable."""

    def __init__(self, handler: Handler, policy: AccessPolicy) -> None:
        self.handler = handler
        self.policy = policy

    def __call__(self, request: HttpRequest) -> HttpResponse:
        denial = self.policy.check(api_of(request.path), request.headers, request.peer)
        if denial is None:
            return self.handler(request)
        return json_error_response(HTTPStatus.FORBIDDEN, refusal_message(denial))


def refusal_message(denial: Denial) -> str:
    """Triton's text when a header would let the request through; otherwise
    what to configure so that other machines may call the API."""
    if denial.header is not None:
        return f"This API is restricted, expecting header '{denial.header}'"
    return (
        f"API '{denial.api}' is only served to clients on this machine (loopback); "
        f"to allow other clients set 'api_key_file' (they send the key in header "
        f"'{API_KEY_HEADER}') or restrict it with --http-restricted-api="
        f"{denial.api}:<header>=<value>"
    )
