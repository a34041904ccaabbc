"""Triton's model repository extension: index, load, unload.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md
"""

from __future__ import annotations

import json

from edgebox.errors import InvalidArgument
from edgebox.protocol.audit import audited
from edgebox.protocol.http import render
from edgebox.protocol.http.messages import HttpRequest, HttpResponse
from edgebox.protocol.http.request_json import parse_object
from edgebox.repository_control import RepositoryControl


def index(control: RepositoryControl, request: HttpRequest) -> HttpResponse:
    body = _json_body(request, "repository index")
    ready = body.get("ready", False)
    if not isinstance(ready, bool):
        raise InvalidArgument("repository index: 'ready' must be true or false")
    entries = control.repository_index(ready_only=ready)
    return HttpResponse(200, [json.dumps(render.repository_index(entries)).encode()])


def load(control: RepositoryControl, request: HttpRequest, name: str) -> HttpResponse:
    body = _json_body(request, f"load '{name}'")
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidArgument(f"load '{name}': 'parameters' must be an object")
    audited("load", "http", request.peer, name, lambda: control.load_model(name, parameters))
    return HttpResponse(200, [])


def unload(control: RepositoryControl, request: HttpRequest, name: str) -> HttpResponse:
    body = _json_body(request, f"unload '{name}'")
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidArgument(f"unload '{name}': 'parameters' must be an object")
    dependents = parameters.get("unload_dependents", False)
    if not isinstance(dependents, bool):
        raise InvalidArgument(f"unload '{name}': 'unload_dependents' must be true or false")
    audited("unload", "http", request.peer, name, lambda: control.unload_model(name, dependents))
    return HttpResponse(200, [])


def _json_body(request: HttpRequest, what: str) -> dict:
    if not len(request.body):
        return {}
    return parse_object(request.body, what)
