"""The coarse tiers (1 h and 24 h) on disk, so a restart keeps "since when".

One file, ``<state_directory>/history.json.gz``: gzip'd JSON, written whole
at a bounded cadence (``history.persist_interval_s``, 5 min by default, and
once at a clean stop) through a temporary file, fsync and rename, so a power
cut leaves the previous file or the new one, never half of one. The 15 min
tier is not written: it would cost a write per few seconds of eMMC for
minutes of history.

Reading trusts nothing: a file that is not gzip, not JSON, not ours
(``format``/``version``), larger than ``MAX_FILE_BYTES`` unpacked, or with
any value of the wrong shape is logged and ignored whole; the daemon starts
with empty tiers and the next write replaces it. Points outside the tier's
span (older than it, or from the future) are dropped.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import zlib
from pathlib import Path
from typing import Any

from edgebox.history.counters import MODEL_COLUMNS
from edgebox.history.store import HistoryStore, ModelFigures, SeriesKey
from edgebox.history.tiers import PERSISTED, Point

log = logging.getLogger("edgebox.history")

FILE_NAME = "history.json.gz"
FORMAT = "edgebox-history"
VERSION = 1
MAX_FILE_BYTES = 8 * 1024 * 1024
"""The most read back, unpacked (a worst-case file is about 1 MB unpacked)."""
MAX_NAME_CHARS = 256
FUTURE_SLACK_S = 60.0


class UnreadableHistory(ValueError):
    """The file is not a history this daemon wrote: the message says why."""


def encode(store: HistoryStore, now: float) -> bytes:
    """The persisted tiers of ``store`` as the file's bytes."""
    tiers: dict[str, Any] = {}
    for name in PERSISTED:
        tiers[name] = {
            "step_s": store.tiers[name].step_s,
            "models": [
                {
                    "model": model,
                    "version": version,
                    "points": [[point.timestamp, *point.value] for point in points],
                }
                for (model, version), points in store.series(name)
            ],
            "device": [[point.timestamp, point.value] for point in store.device(name)],
        }
    document = {
        "format": FORMAT,
        "version": VERSION,
        "written_at": now,
        "model_columns": list(MODEL_COLUMNS),
        "tiers": tiers,
    }
    text = json.dumps(document, separators=(",", ":"), allow_nan=False)
    return gzip.compress(text.encode(), compresslevel=6, mtime=0)


def save(path: Path, store: HistoryStore, now: float) -> int:
    """Writes the file atomically; returns the bytes written. OSError when
    it cannot (the caller logs it and tries again at the next cadence)."""
    data = encode(store, now)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return len(data)


def load(path: Path, store: HistoryStore, now: float) -> bool:
    """Restores the file's tiers into ``store``; False (logged, unless the
    file does not exist) when there is nothing usable."""
    try:
        with gzip.open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return False
    except (OSError, EOFError, zlib.error) as exc:
        log.warning("history: ignoring %s: not a readable gzip file (%s)", path, exc)
        return False
    try:
        if len(data) > MAX_FILE_BYTES:
            raise UnreadableHistory(f"more than {MAX_FILE_BYTES} bytes unpacked")
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise UnreadableHistory(f"not JSON ({exc})") from None
        restored = decode(document, store, now)
    except UnreadableHistory as exc:
        log.warning("history: ignoring %s: %s; starting with no history", path, exc)
        return False
    for name, (models, device) in restored.items():
        store.restore(name, models, device)
    return True


def decode(document: Any, store: HistoryStore, now: float) -> dict[str, tuple[dict, list]]:
    """Every persisted tier's points, checked; UnreadableHistory at the
    first thing out of shape."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise UnreadableHistory(f"not an edgebox history file (no 'format': '{FORMAT}')")
    if document.get("version") != VERSION:
        raise UnreadableHistory(
            f"history file version {document.get('version')!r}, this edgebox reads {VERSION}"
        )
    if document.get("model_columns") != list(MODEL_COLUMNS):
        raise UnreadableHistory("its model columns differ from this edgebox's")
    tiers = document.get("tiers")
    if not isinstance(tiers, dict):
        raise UnreadableHistory("'tiers' is not a mapping")
    restored = {}
    for name in PERSISTED:
        tier = store.tiers[name]
        given = tiers.get(name)
        if given is None:
            continue
        if not isinstance(given, dict) or given.get("step_s") != tier.step_s:
            raise UnreadableHistory(f"tier '{name}' is not one of {tier.step_s:g} s steps")
        oldest, newest = now - tier.span_s, now + FUTURE_SLACK_S
        models: dict[SeriesKey, list[Point[ModelFigures]]] = {}
        for entry in _list(given.get("models"), f"tier '{name}' models"):
            key = (_name(entry, "model"), _name(entry, "version"))
            points = []
            for raw in _list(entry.get("points"), f"'{key[0]}' points"):
                if not isinstance(raw, list) or len(raw) != 1 + len(MODEL_COLUMNS):
                    raise UnreadableHistory(f"a point of model '{key[0]}' is out of shape")
                timestamp = _number(raw[0])
                values = tuple(None if v is None else _number(v) for v in raw[1:])
                if oldest < timestamp <= newest:
                    points.append(Point(timestamp, values))
            models[key] = points[-tier.capacity :]
        device = []
        for raw in _list(given.get("device"), f"tier '{name}' device"):
            if not isinstance(raw, list) or len(raw) != 2 or not isinstance(raw[1], dict):
                raise UnreadableHistory("a device point is out of shape")
            timestamp = _number(raw[0])
            columns = {str(k)[:MAX_NAME_CHARS]: _number(v) for k, v in raw[1].items()}
            if oldest < timestamp <= newest:
                device.append(Point(timestamp, columns))
        restored[name] = (models, device[-tier.capacity :])
    return restored


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise UnreadableHistory(f"{what} is not a list")
    return value


def _name(entry: Any, field: str) -> str:
    value = entry.get(field) if isinstance(entry, dict) else None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        raise UnreadableHistory(f"a series has no valid '{field}'")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UnreadableHistory(f"expected a number, got {value!r}")
    return float(value)
