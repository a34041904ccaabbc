"""edgebox's rollout resource over HTTP, beside Triton's repository
extension (and, like it, the ``model-repository`` API for access control)::

    GET  /v2/repository/rollouts                     the rollouts in progress
    GET  /v2/repository/models/{m}/rollout           the model's rollout resource
    POST /v2/repository/models/{m}/rollout/{action}  promote | abort | release

Every answer is the resource as ``RepositoryControl`` gives it (docs/http_api.md
lists its fields); a POST answers with the resource after the action, so a
client sees what its action did without a second request. POSTs leave a
journal line as load and unload do (``Repository: rollout abort api=http ...``).
"""

from __future__ import annotations

import json

from edgebox.protocol.audit import audited
from edgebox.protocol.http.messages import HttpRequest, HttpResponse
from edgebox.protocol.http.request_json import parse_object
from edgebox.repository_control import ROLLOUT_ACTIONS, RepositoryControl


def route(
    control: RepositoryControl, request: HttpRequest, method: str, parts: list[str]
) -> HttpResponse | None:
    """The answer for ``parts`` (the path after ``/v2/``), or None when no
    rollout route matches it with this method (the caller answers 405 for a
    path ``is_rollout_path`` knows, 404 otherwise)."""
    if not is_rollout_path(parts):
        return None
    if parts == ["repository", "rollouts"]:
        return _json(control.rollout_statuses()) if method == "GET" else None
    name = parts[2]
    if len(parts) == 4:
        return _json(control.rollout_status(name)) if method == "GET" else None
    if method != "POST":
        return None
    action = parts[4]
    # Nothing is read from the body yet; refusing one that is not a JSON object
    # keeps room for parameters later without changing what old clients meant.
    if len(request.body):
        parse_object(request.body, f"rollout {action} '{name}'")
    document = audited(
        f"rollout {action}",
        "http",
        request.peer,
        name,
        lambda: control.rollout_action(name, action),
    )
    return _json(document)


def is_rollout_path(parts: list[str]) -> bool:
    """True for the paths (after ``/v2/``) this module serves, whatever the method."""
    if parts == ["repository", "rollouts"]:
        return True
    if len(parts) not in (4, 5) or parts[:2] != ["repository", "models"]:
        return False
    return parts[3] == "rollout" and (len(parts) == 4 or parts[4] in ROLLOUT_ACTIONS)


def _json(document) -> HttpResponse:
    return HttpResponse(200, [json.dumps(document).encode()])
