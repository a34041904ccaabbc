"""Blueprint ``api``: the JSON API under ``/api/v1/`` that the pages poll
(docs/dashboard.md, "JSON API"). Every view reads what the daemon already
keeps; the model actions (load, unload, rollback, restore, and a rollout's
promote, abort and release) call ``RepositoryControl``'s verbs."""

from __future__ import annotations

import dataclasses
import logging
import time

from flask import Blueprint, Response, jsonify, request

from edgebox import __version__
from edgebox.dashboard.access import csrf_token, current_user
from edgebox.dashboard.audit import audit
from edgebox.dashboard.board import board_document
from edgebox.dashboard.error_map import status_of
from edgebox.dashboard.models_view import models_document
from edgebox.dashboard.overview import device_document
from edgebox.dashboard.snapshot import name_problem, snapshot_filename
from edgebox.dashboard.state import state
from edgebox.errors import EdgeboxError
from edgebox.lifecycle.states import ModelState
from edgebox.repository_control import ROLLOUT_ACTIONS

api = Blueprint("api", __name__, url_prefix="/api/v1")

MAX_HISTORY_S = 86400
MAX_LOG_LINES = 2000
MAX_LOG_QUERY_CHARS = 200
LOG_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


@api.get("/session")
def session() -> Response:
    current = state()
    return jsonify(
        user=current_user(),
        anonymous_read=current.settings.anonymous_read,
        password_set=current.sessions.fingerprint is not None,
        control_mode=current.deps.control_mode,
        csrf_token=csrf_token(),
        edgebox_version=__version__,
    )


@api.get("/overview")
def overview() -> Response:
    current = state()
    deps = current.deps
    latest = deps.telemetry.latest() if deps.telemetry is not None else None
    ready = total = 0
    for versions in _states_by_model(deps.repository_control.repository_index()).values():
        total += 1
        ready += ModelState.READY in versions
    return jsonify(
        device=device_document(deps.telemetry, latest, current.started_at),
        telemetry=latest.as_dict() if latest is not None else None,
        mqtt=dataclasses.asdict(deps.mqtt.stats()) if deps.mqtt is not None else None,
        models={"ready": ready, "total": total},
        streams=len(deps.streams.status()) if deps.streams is not None else 0,
    )


@api.get("/telemetry")
def telemetry() -> Response | tuple:
    seconds = _query_number("seconds", "900", float)
    if seconds is None or not 0 < seconds <= MAX_HISTORY_S:
        expected = f"a number of seconds 1..{MAX_HISTORY_S}"
        return _error(400, f"'seconds': expected {expected}, got {request.args['seconds']!r}")
    source = state().deps.telemetry
    if source is None:
        return jsonify(samples=[], reason="telemetry off")
    return jsonify(samples=[sample.as_dict() for sample in source.history(seconds)])


@api.get("/models")
def models() -> Response:
    current = state()
    deps = current.deps
    return jsonify(
        models_document(
            deps.dataplane,
            deps.repository_control,
            deps.registry,
            deps.control_mode,
            current.events.last_error,
        )
    )


@api.post("/models/<name>/load")
def load(name: str) -> Response | tuple:
    return _act(name, "load", lambda: state().deps.repository_control.load_model(name))


@api.post("/models/<name>/unload")
def unload(name: str) -> Response | tuple:
    """Unloading a model takes the loaded ensembles that use it down too (as
    in Triton); the dashboard does that only when asked to knowingly: without
    ``{"confirm": true}`` such an unload answers 409 naming them in
    ``used_by``, and nothing is unloaded."""
    body = request.get_json(silent=True)
    confirm = body.get("confirm", False) if isinstance(body, dict) else False
    if not isinstance(confirm, bool):
        return _error(400, f"unload '{name}': 'confirm' must be true or false, got {confirm!r}")
    deps = state().deps
    used_by = deps.repository_control.served_dependents(name)
    if used_by and not confirm and deps.control_mode == "explicit":
        audit(
            "unload",
            current_user(),
            logging.WARNING,
            model=name,
            result="not-confirmed",
            used_by=",".join(used_by),
        )
        listed = ", ".join(f"'{ensemble}'" for ensemble in used_by)
        message = (
            f"unload '{name}': loaded ensembles use it and would be unloaded too: {listed}; "
            'send {"confirm": true} to unload them all'
        )
        return jsonify(error=message, used_by=used_by), 409
    return _act(name, "unload", lambda: deps.repository_control.unload_model(name))


@api.post("/models/<name>/rollback")
def rollback(name: str) -> Response | tuple:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        return _error(400, f"model '{name}' rollback: expected a JSON body {{\"version\": N}}")
    version = body.get("version")
    try:
        moved = state().deps.repository_control.rollback_model(name, version)
    except EdgeboxError as exc:
        return _refused("rollback", name, exc, version=version)
    audit(
        "rollback",
        current_user(),
        logging.WARNING,
        model=name,
        version=version,
        result="ok",
        moved_to_rolled_back=",".join(map(str, moved)),
    )
    return jsonify(model=name, action="rollback", version=int(version), moved=moved)


@api.post("/models/<name>/restore")
def restore(name: str) -> Response | tuple:
    try:
        moved = state().deps.repository_control.restore_model(name)
    except EdgeboxError as exc:
        return _refused("restore", name, exc)
    audit(
        "restore",
        current_user(),
        logging.WARNING,
        model=name,
        result="ok",
        moved_back=",".join(map(str, moved)),
    )
    return jsonify(model=name, action="restore", moved=moved)


@api.get("/models/<name>/rollout")
def rollout(name: str) -> Response | tuple:
    try:
        return jsonify(state().deps.repository_control.rollout_status(name))
    except EdgeboxError as exc:
        return _error(status_of(exc), str(exc))


@api.post("/models/<name>/rollout/<action>")
def rollout_action(name: str, action: str) -> Response | tuple:
    """Promote or abort the rollout in progress, or release the held
    versions; answers the rollout resource afterwards. The audit line names
    the version(s) as they stood just before the action: afterwards an
    aborted or released version is no longer in the resource."""
    control = state().deps.repository_control
    known = action in ROLLOUT_ACTIONS
    # An action not known is the client's text: a quoted field (``asked``),
    # never part of the line's fixed words. RepositoryControl refuses it.
    audited, fields = (f"rollout {action}", {}) if known else ("rollout", {"asked": action})
    try:
        before = control.rollout_status(name) if known else {}
        after = control.rollout_action(name, action)
    except EdgeboxError as exc:
        return _refused(audited, name, exc, **fields)
    user = current_user()
    if action == "release":
        released = ",".join(str(held["version"]) for held in before["held"])
        audit(audited, user, logging.WARNING, model=name, result="ok", released=released)
    else:
        version = before.get("version")
        audit(audited, user, logging.WARNING, model=name, version=version, result="ok")
    return jsonify(after)


@api.get("/version-folders")
def version_folders() -> Response:
    listed = [
        {"name": name, "versions": list(folders.versions), "rolled_back": list(folders.rolled_back)}
        for name, folders in sorted(state().deps.repository_control.version_folders().items())
    ]
    return jsonify(models=listed)


@api.get("/streams")
def streams() -> Response:
    deps = state().deps
    listed = []
    now = time.time()
    reports = deps.stream_health.health() if deps.stream_health is not None else []
    health = {report.name: report for report in reports}
    for status in deps.streams.status() if deps.streams is not None else []:
        latest = deps.frames.get(status.name) if deps.frames is not None else None
        document = status.as_dict()
        document["latency"] = latest.result.as_dict()["latency"] if latest is not None else None
        document["frame_index"] = latest.result.frame_index if latest is not None else None
        document["frame_url"] = f"/api/v1/streams/{status.name}/frame.jpg"
        document["snapshot_url"] = f"/api/v1/streams/{status.name}/snapshot.jpg"
        document["health"] = health[status.name].as_dict(now) if status.name in health else None
        listed.append(document)
    return jsonify(streams=listed)


@api.get("/streams/<name>/frame.jpg")
def frame(name: str) -> Response | tuple:
    refused = _unknown_stream(name)
    if refused is not None:
        return refused
    data = state().frames.jpeg(name)
    if data is None:
        return _error(404, f"stream '{name}' has no inferred frame yet")
    response = Response(data, mimetype="image/jpeg")
    response.headers["Cache-Control"] = "no-store"
    return response


@api.get("/events")
def events() -> Response | tuple:
    after = _query_number("after", "0", int)
    if after is None:
        raw = request.args["after"]
        return _error(400, f"'after': expected an event id (an integer), got {raw!r}")
    listed, last_id = state().events.after(after)
    return jsonify(events=listed, last_id=last_id)


@api.get("/logs")
def logs() -> Response | tuple:
    """The daemon's recent log lines, oldest first: ``level`` the lowest
    shown, ``q`` a text the logger name or message holds (any case),
    ``limit`` the newest lines kept. Needs a login even with
    ``anonymous_read`` (access.py): lines name clients and users."""
    level_name = request.args.get("level", "DEBUG").upper()
    if level_name not in LOG_LEVELS:
        expected = ", ".join(LOG_LEVELS)
        return _error(400, f"'level': expected one of {expected}, got {request.args['level']!r}")
    text = request.args.get("q", "")
    if len(text) > MAX_LOG_QUERY_CHARS:
        return _error(400, f"'q': expected at most {MAX_LOG_QUERY_CHARS} characters")
    limit = _query_number("limit", "200", int)
    if limit is None or not 1 <= limit <= MAX_LOG_LINES:
        raw = request.args["limit"]
        return _error(400, f"'limit': expected a number of lines 1..{MAX_LOG_LINES}, got {raw!r}")
    ring = state().deps.logs
    if ring is None:
        return jsonify(lines=[], reason="log lines are not kept by this process")
    lines = ring.lines(LOG_LEVELS[level_name], text, limit)
    return jsonify(lines=[line.as_dict() for line in lines])


def _act(name: str, action: str, call) -> Response | tuple:
    try:
        call()
    except EdgeboxError as exc:
        return _refused(action, name, exc)
    audit(action, current_user(), model=name, result="ok")
    return jsonify(model=name, action=action, state="ok")


def _refused(action: str, name: str, exc: EdgeboxError, **fields: object) -> tuple:
    audit(
        action,
        current_user(),
        logging.WARNING,
        model=name,
        **fields,
        result="failed",
        error=str(exc),
    )
    return _error(status_of(exc), str(exc))


def _query_number(name: str, default: str, kind: type[float] | type[int]) -> float | None:
    """The query's ``name`` as ``kind`` (``default`` when absent); None when it
    is not one (float's NaN too, which no range admits)."""
    try:
        value = kind(request.args.get(name, default))
    except ValueError:
        return None
    return None if value != value else value


def _unknown_stream(name: str) -> tuple | None:
    """400 for a name no stream may have, 404 for one no stream has."""
    problem = name_problem(name)
    if problem is not None:
        return _error(400, problem)
    streams = state().deps.streams
    if streams is None or name not in {s.name for s in streams.status()}:
        return _error(404, f"unknown stream '{name}'")
    return None


def _error(status: int, message: str) -> tuple:
    return jsonify(error=message), status


def _states_by_model(index) -> dict[str, set]:
    states: dict[str, set] = {}
    for entry in index:
        states.setdefault(entry.name, set()).add(entry.state)
    return states


@api.get("/board")
def board() -> Response:
    return jsonify(board_document(state().deps.telemetry))


@api.get("/streams/<name>/snapshot.jpg")
def snapshot(name: str) -> Response | tuple:
    """The frame ``frame()`` serves, as a download named for the stream and
    the frame's UTC time."""
    refused = _unknown_stream(name)
    if refused is not None:
        return refused
    deps = state().deps
    latest = deps.frames.get(name) if deps.frames is not None else None
    data = state().frames.jpeg(name)
    if latest is None or data is None:
        return _error(409, f"stream '{name}' has no frame yet; try again once the page shows one")
    response = Response(data, mimetype="image/jpeg")
    filename = snapshot_filename(name, latest.result.timestamp)
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.headers["Cache-Control"] = "no-store"
    return response
