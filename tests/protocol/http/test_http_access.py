"""The HTTP side of access control: which API a request path belongs to, and
the 403 the wrapper answers in place of the handler.

Categories and the refusal text marked "Triton 2.51" were observed from a real
tritonserver 2.51.0 started with one ``--http-restricted-api`` group per API
(see /work/notes/triton.md). The peer is passed in the request, so a
non-loopback client is tested without leaving 127.0.0.1.
"""

from __future__ import annotations

import json

import pytest

from edgebox.protocol.access_policy import AccessPolicy, parse_restrictions
from edgebox.protocol.http.access import HttpAccessControl, api_of
from edgebox.protocol.http.messages import HttpRequest, HttpResponse

REMOTE = "192.0.2.7"

# Triton 2.51: every one of these is refused naming the group of the API shown.
TRITON_CATEGORIES = [
    ("GET", "/v2", "metadata"),
    ("GET", "/v2/health/live", "health"),
    ("GET", "/v2/health/ready", "health"),
    ("POST", "/v2/health/live", "health"),
    ("HEAD", "/v2/health/live", "health"),
    ("GET", "/v2/models/multiply", "metadata"),
    ("GET", "/v2/models/multiply/versions/1", "metadata"),
    ("PUT", "/v2/models/multiply", "metadata"),
    ("GET", "/v2/models/nope", "metadata"),
    ("GET", "/v2/models/multiply/ready", "health"),
    ("GET", "/v2/models/multiply/versions/1/ready", "health"),
    ("GET", "/v2/models/multiply/config", "model-config"),
    ("GET", "/v2/models/multiply/versions/1/config", "model-config"),
    ("GET", "/v2/models/nope/config", "model-config"),
    ("GET", "/v2/models/stats", "statistics"),
    ("GET", "/v2/models/multiply/stats", "statistics"),
    ("GET", "/v2/models/multiply/versions/1/stats", "statistics"),
    ("POST", "/v2/models/multiply/infer", "inference"),
    ("GET", "/v2/models/multiply/infer", "inference"),
    ("POST", "/v2/models/multiply/versions/1/infer", "inference"),
    ("POST", "/v2/models/multiply/generate", "inference"),
    ("POST", "/v2/models/multiply/generate_stream", "inference"),
    ("GET", "/v2/models/multiply/versions/1/generate", "inference"),
    ("GET", "/v2/trace/setting", "trace"),
    ("POST", "/v2/trace/setting", "trace"),
    ("GET", "/v2/models/multiply/trace/setting", "trace"),
    ("GET", "/v2/logging", "logging"),
    ("POST", "/v2/logging", "logging"),
    ("DELETE", "/v2/logging", "logging"),
    ("POST", "/v2/repository/index", "model-repository"),
    ("GET", "/v2/repository/index", "model-repository"),
    ("POST", "/v2/repository/models/multiply/load", "model-repository"),
    ("POST", "/v2/repository/models/multiply/unload", "model-repository"),
    ("GET", "/v2/systemsharedmemory/status", "shared-memory"),
    ("GET", "/v2/systemsharedmemory/region/r/status", "shared-memory"),
    ("POST", "/v2/systemsharedmemory/region/r/register", "shared-memory"),
    ("POST", "/v2/systemsharedmemory/unregister", "shared-memory"),
    ("POST", "/v2/systemsharedmemory/region/r/unregister", "shared-memory"),
    ("GET", "/v2/cudasharedmemory/status", "shared-memory"),
    ("POST", "/v2/cudasharedmemory/region/r/register", "shared-memory"),
    ("POST", "/v2/cudasharedmemory/unregister", "shared-memory"),
]


@pytest.mark.parametrize(("method", "path", "api"), TRITON_CATEGORIES)
def test_paths_belong_to_tritons_api_categories(method: str, path: str, api: str) -> None:
    assert api_of(path) == api


@pytest.mark.parametrize(
    "path",
    # Triton 2.51 answers 404 to these whatever is restricted.
    [
        "/v2/bogus",
        "/v2/health",
        "/v2/health/bogus",
        "/v2/models",
        "/v2/models/multiply/bogus",
        "/metrics",
        "/",
        "/v3/repository/index",
    ],
)
def test_unknown_paths_belong_to_no_api(path: str) -> None:
    assert api_of(path) is None


@pytest.mark.parametrize(
    ("path", "api"),
    [
        # Where V2Handlers serves a path Triton would not (it strips slashes at the
        # ends), the path keeps its category, so a restriction cannot be sidestepped.
        ("/v2/", "metadata"),
        ("//v2/repository/index/", "model-repository"),
        ("/v2/models/multiply/infer/", "inference"),
        # Unlike Triton (404), every path under a control API's prefix is refused
        # when that API is: an endpoint added later cannot slip through.
        ("/v2/repository/bogus", "model-repository"),
        ("/v2/repository/models/multiply/bogus", "model-repository"),
        ("/v2/logging/x", "logging"),
        ("/v2/trace", "trace"),
        ("/v2/systemsharedmemory/bogus", "shared-memory"),
        ("/v2/models/multiply/trace", "trace"),
        ("/v2/models/multiply/versions/1/trace/setting", "trace"),
    ],
)
def test_edgebox_paths_fail_closed(path: str, api: str) -> None:
    assert api_of(path) == api


class RecordingHandler:
    def __init__(self) -> None:
        self.requests: list[HttpRequest] = []

    def __call__(self, request: HttpRequest) -> HttpResponse:
        self.requests.append(request)
        return HttpResponse(200, [b"{}"])


def request(
    method: str, path: str, headers: dict[str, str] | None = None, peer: str = "127.0.0.1"
) -> HttpRequest:
    return HttpRequest(method, path, "", headers or {}, memoryview(b""), peer=peer)


def body(response: HttpResponse) -> dict:
    return json.loads(b"".join(response.body))


def test_restricted_request_without_the_header_gets_tritons_403() -> None:
    inner = RecordingHandler()
    handler = HttpAccessControl(
        inner, AccessPolicy(parse_restrictions(["model-repository,statistics:admin-key=secret"]))
    )
    for headers in ({}, {"admin-key": "wrong"}):
        response = handler(request("POST", "/v2/repository/index", headers))
        assert response.status == 403
        # Triton 2.51, byte for byte (Triton sends it as text/plain; edgebox as JSON).
        assert b"".join(response.body) == (
            b'{"error": "This API is restricted, expecting header \'admin-key\'"}'
        )
        assert response.content_type == "application/json"
    assert inner.requests == []
    assert handler(request("POST", "/v2/repository/index", {"admin-key": "secret"})).status == 200
    assert handler(request("GET", "/v2/models/x/stats", {"admin-key": "secret"})).status == 200
    assert handler(request("POST", "/v2/models/x/infer")).status == 200
    assert len(inner.requests) == 3


def test_remote_client_is_refused_the_control_apis_by_default() -> None:
    inner = RecordingHandler()
    handler = HttpAccessControl(inner, AccessPolicy({}))
    response = handler(request("POST", "/v2/repository/models/m/load", peer=REMOTE))
    assert response.status == 403
    assert body(response) == {
        "error": "API 'model-repository' is only served to clients on this machine (loopback); "
        "to allow other clients set 'api_key_file' (they send the key in header "
        "'edgebox-api-key') or restrict it with --http-restricted-api="
        "model-repository:<header>=<value>"
    }
    assert inner.requests == []
    assert handler(request("POST", "/v2/repository/models/m/load")).status == 200
    assert handler(request("POST", "/v2/models/m/infer", peer=REMOTE)).status == 200


def test_remote_client_with_the_api_key_may_use_the_control_apis() -> None:
    key = "k" * 32
    inner = RecordingHandler()
    handler = HttpAccessControl(inner, AccessPolicy({}, api_key=key))
    refused = handler(request("GET", "/v2/logging", {"edgebox-api-key": "nope"}, peer=REMOTE))
    assert refused.status == 403
    assert body(refused) == {"error": "This API is restricted, expecting header 'edgebox-api-key'"}
    allowed = handler(request("GET", "/v2/logging", {"edgebox-api-key": key}, peer=REMOTE))
    assert allowed.status == 200
    assert handler(request("GET", "/v2/logging", peer="::1")).status == 200
