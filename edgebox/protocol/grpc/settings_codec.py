"""``LogSettings`` and ``TraceSetting`` messages to and from the plain dicts
the dataplane's settings verbs take and answer (the JSON HTTP carries).

A log setting is a oneof of bool, uint32 and string; one left unset means "no
change", as JSON null does. A trace setting is a list of strings; an empty
list means "no change" globally and "follow the global value" for a model.
"""

from __future__ import annotations

from typing import Any

from tritonclient.grpc import service_pb2 as pb


def log_changes(request: pb.LogSettingsRequest) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for key, value in request.settings.items():
        choice = value.WhichOneof("parameter_choice")
        changes[key] = None if choice is None else getattr(value, choice)
    return changes


def log_response(settings: dict[str, Any]) -> pb.LogSettingsResponse:
    response = pb.LogSettingsResponse()
    for key, value in settings.items():
        if isinstance(value, bool):
            response.settings[key].bool_param = value
        elif isinstance(value, int):
            response.settings[key].uint32_param = value
        else:
            response.settings[key].string_param = value
    return response


def trace_changes(request: pb.TraceSettingRequest) -> dict[str, Any]:
    return {key: list(value.value) for key, value in request.settings.items()}


def trace_response(settings: dict[str, Any]) -> pb.TraceSettingResponse:
    response = pb.TraceSettingResponse()
    for key, value in settings.items():
        response.settings[key].value.extend(value if isinstance(value, list) else [value])
    return response
