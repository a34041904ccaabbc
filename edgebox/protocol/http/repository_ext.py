"""Triton's model repository extension: index, load, unload.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md
"""

from __future__ import annotations

import base64
import binascii
import json

from edgebox.errors import InvalidArgument
from edgebox.protocol.audit import audited, audited_load
from edgebox.protocol.http import render
from edgebox.protocol.http.messages import HttpRequest, HttpResponse
from edgebox.protocol.http.request_json import parse_object
from edgebox.repository.override_files import is_file_parameter
from edgebox.repository_control import RepositoryControl, poll_refusal


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
    audited_load(
        "http",
        request.peer,
        name,
        lambda: _decoded_files(name, parameters),
        lambda decoded: control.load_model(name, decoded),
    )
    return HttpResponse(200, [])


def _decoded_files(name: str, parameters: dict) -> dict:
    """The parameters with each ``file:`` value's base64 text decoded, as
    tritonclient.http sends them; strict: anything outside the base64
    alphabet, or bad padding, is refused rather than decoded in part."""
    decoded = dict(parameters)
    for key, value in parameters.items():
        if not is_file_parameter(key):
            continue
        if not isinstance(value, str):
            raise poll_refusal(
                name, f"load parameter '{key[:80]}' must be the file's bytes as base64 text"
            )
        try:
            decoded[key] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise poll_refusal(
                name, f"load parameter '{key[:80]}' is not valid base64 ({exc})"
            ) from None
    return decoded


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
