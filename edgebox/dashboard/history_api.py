"""Blueprint ``history_api``: ``GET /api/v1/history``, the downsampled record
of each version's request figures and of the device's telemetry
(edgebox/history/, docs/dashboard.md "History"), as JSON columns or as the
same values in CSV. Reads the sampler's store; never the counters
themselves. Login rules are every API read's (access.py)."""

from __future__ import annotations

import re

from flask import Blueprint, Response, jsonify, request

from edgebox.dashboard.state import state
from edgebox.history.table import csv_text, device_document, models_document
from edgebox.history.tiers import RANGES

history_api = Blueprint("history_api", __name__, url_prefix="/api/v1")

PARAMETERS = ("range", "series", "model", "version", "format")
SERIES = ("models", "device")
FORMATS = ("json", "csv")
MAX_SHOWN_CHARS = 80


@history_api.get("/history")
def history() -> Response | tuple:
    args = request.args
    unknown = sorted(set(args) - set(PARAMETERS))
    if unknown:
        return _error(f"unknown parameter '{_shown(unknown[0])}'; expected {', '.join(PARAMETERS)}")
    for name in PARAMETERS:
        if len(args.getlist(name)) > 1:
            return _error(f"'{name}' given more than once")
    chosen = args.get("range", "15m")
    series = args.get("series", "models")
    form = args.get("format", "json")
    for name, value, allowed in (
        ("range", chosen, RANGES),
        ("series", series, SERIES),
        ("format", form, FORMATS),
    ):
        if value not in allowed:
            return _error(f"'{name}': expected one of {', '.join(allowed)}, got '{_shown(value)}'")
    model, version = args.get("model"), args.get("version")
    if series == "device" and (model is not None or version is not None):
        return _error("'model' and 'version' go with series=models, not series=device")
    if version is not None and model is None:
        return _error("'version' needs 'model'")
    if version is not None and not version.isdigit():
        return _error(f"'version': expected a version number, got '{_shown(version)}'")
    deps = state().deps
    sampler = deps.history
    if sampler is None:
        if model is not None:
            return _error(f"'model': no history of model '{_shown(model)}': history is off")
        return jsonify(range=chosen, series=series, reason="history off", columns=[], models=[])
    store = sampler.store
    if model is not None:
        recorded = model in store.model_names()
        if not recorded and not deps.registry.served_versions(model):
            listed = ", ".join(sorted(store.model_names())) or "none yet"
            return _error(
                f"'model': no history of model '{_shown(model)}' "
                f"(models with history: {_shown(listed)})"
            )
        if version is not None and version not in store.versions_of(model):
            served = {str(number) for number in deps.registry.served_versions(model)}
            if version not in served:
                return _error(f"'version': no history of model '{_shown(model)}' version {version}")
    tier = store.tiers[chosen]
    document = (
        device_document(store, tier)
        if series == "device"
        else models_document(store, tier, model, version)
    )
    if form == "json":
        return jsonify(document)
    response = Response(csv_text(document), mimetype="text/csv")
    name = "-".join(part for part in ("edgebox-history", series, chosen, model, version) if part)
    response.headers["Content-Disposition"] = f'attachment; filename="{_file_name(name)}.csv"'
    return response


def _error(message: str) -> tuple:
    return jsonify(error=message), 400


def _shown(text: str) -> str:
    """A client's text quoted back, cut short and without control characters."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return clean if len(clean) <= MAX_SHOWN_CHARS else clean[:MAX_SHOWN_CHARS] + "…"


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]
