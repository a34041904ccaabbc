"""What the rollout must remember across a restart, in one small JSON file:
which versions proved themselves (trusted), which must not serve again
(rejected, rolled back, quarantined) and which are still on trial.

A version is named by its number and a digest of its files, so a folder
whose files were replaced (a fixed model copied over the bad one) is a new
version to the store: its hold no longer applies and it goes through a
rollout like any other.

Written only when one of those changes (a few hundred bytes, a handful of
times per rollout), atomically (a temporary file, fsync, rename), so a power
cut leaves the old file or the new one. A disk that refuses the write is
logged once; the store keeps working from memory and tries again at the next
change. With no path (tests, a read-only appliance) it lives in memory only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TRUSTED_KEPT = 4
"""Trusted versions remembered per model, newest first."""


def files_digest(fingerprint: tuple) -> str:
    """A version folder's files as the store names them ("" for a folder
    scanned without its files, which the store never names). The folder's
    own entry is left out: loading a python model writes ``__pycache__``
    there."""
    entries = [entry for entry in fingerprint if entry and entry[0] != "."]
    if not entries:
        return ""
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Hold:
    digest: str
    kind: str
    """``rejected``, ``rolled_back`` or ``quarantined``."""
    reason: str
    since: float


@dataclass(frozen=True)
class Trial:
    digest: str
    slot: int
    """Its slot in the crash marks (crash_marks.py)."""
    since: float
    until: float = 0.0
    """When it stops being on trial (0: not serving yet)."""


class RolloutStore:
    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._models: dict[str, dict] = {}
        self._write_failed = False
        if path is not None:
            self._models = _read(path)

    # -- reading ----------------------------------------------------------

    def trusted(self, model: str, version: int, digest: str) -> bool:
        with self._lock:
            return self._entry(model)["trusted"].get(str(version)) == digest

    def trusted_versions(self, model: str) -> dict[int, str]:
        with self._lock:
            return {int(v): d for v, d in self._entry(model)["trusted"].items()}

    def holds(self, model: str) -> dict[int, Hold]:
        with self._lock:
            return {int(v): Hold(**h) for v, h in self._entry(model)["held"].items()}

    def trials(self, model: str | None = None) -> dict[tuple[str, int], Trial]:
        with self._lock:
            names = [model] if model is not None else list(self._models)
            return {
                (name, int(v)): Trial(**t)
                for name in names
                for v, t in self._entry(name)["trials"].items()
            }

    def used_slots(self) -> set[int]:
        return {trial.slot for trial in self.trials().values()}

    # -- changes ----------------------------------------------------------

    def trust(self, model: str, version: int, digest: str) -> None:
        with self._lock:
            entry = self._entry(model)
            trusted = entry["trusted"]
            trusted[str(version)] = digest
            for old in sorted(trusted, key=int)[:-TRUSTED_KEPT]:
                del trusted[old]
            entry["trials"].pop(str(version), None)
            self._save()

    def hold(self, model: str, version: int, hold: Hold) -> None:
        with self._lock:
            entry = self._entry(model)
            entry["held"][str(version)] = asdict(hold)
            entry["trials"].pop(str(version), None)
            self._save()

    def release(self, model: str, version: int | None = None) -> list[int]:
        """Drop the holds on ``model`` (one version, or all); the versions released."""
        with self._lock:
            held = self._entry(model)["held"]
            released = [v for v in held if version is None or v == str(version)]
            for v in released:
                del held[v]
            if released:
                self._save()
            return sorted(int(v) for v in released)

    def begin_trial(self, model: str, version: int, trial: Trial) -> None:
        with self._lock:
            self._entry(model)["trials"][str(version)] = asdict(trial)
            self._save()

    def end_trial(self, model: str, version: int) -> None:
        with self._lock:
            if self._entry(model)["trials"].pop(str(version), None) is not None:
                self._save()

    # -- internals --------------------------------------------------------

    def _entry(self, model: str) -> dict:
        entry = self._models.setdefault(model, {})
        for key in ("trusted", "held", "trials"):
            entry.setdefault(key, {})
        return entry

    def _save(self) -> None:
        if self._path is None:
            return
        data = json.dumps({"version": 1, "models": self._models}, sort_keys=True).encode()
        temporary = self._path.with_name(self._path.name + ".tmp")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with open(temporary, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self._path)
            self._write_failed = False
        except OSError as exc:
            if not self._write_failed:
                log.error("rollout state: cannot write %s: %s (kept in memory)", self._path, exc)
            self._write_failed = True


def _read(path: Path) -> dict[str, dict]:
    """The file's models; a missing file is empty, an unreadable or corrupt
    one is logged and set aside as ``<name>.corrupt``, never a reason not to
    start."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.error("rollout state: cannot read %s: %s; starting without it", path, exc)
        return {}
    try:
        data = json.loads(raw)
        models = data["models"]
        if not isinstance(models, dict):
            raise ValueError("'models' is not an object")
        for entry in models.values():
            for key in ("trusted", "held", "trials"):
                for item in entry.get(key, {}).values():
                    if key != "trusted":
                        (Hold if key == "held" else Trial)(**item)
        return models
    except (ValueError, KeyError, TypeError) as exc:
        log.error(
            "rollout state: %s is not readable (%s); set aside, starting without it", path, exc
        )
        try:
            os.replace(path, path.with_name(path.name + ".corrupt"))
        except OSError:
            pass
        return {}
