"""Poll mode: every ``poll_interval_s`` the repository is scanned and what
changed is handed to the lifecycle manager.

A model is (re)loaded when its config or its version folders changed, and only
once its config (or, for a model without one, the config's absence) and every
one of its version folders have settled (see ``settle.py``) and no
file in them is still open for writing (``open_writers.py``): while a copy is
in progress, even one paused for longer than a poll, the model keeps serving
exactly what it served. A failed
load is not retried until its files change again, and never stops the poller
from applying other changes (Triton's POLL mode can get stuck after one bad
load; this one cannot).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from edgebox.errors import EdgeboxError
from edgebox.repository.config import CONFIG_FILENAME
from edgebox.repository.layout import (
    Fingerprint,
    ModelFolder,
    RepositorySnapshot,
    scan_repository,
)
from edgebox.repository.open_writers import being_written
from edgebox.repository.settle import SettleTracker

log = logging.getLogger(__name__)


class RepositoryPoller:
    """Owns its thread; the manager's methods are its only side effects."""

    def __init__(self, manager, root: Path, poll_interval_s: float) -> None:
        self._manager = manager
        self._root = root
        self._interval_s = poll_interval_s
        self._settle = SettleTracker()
        self._unchecked: set[Path] = set()
        self._seen: set[Path] = set()
        self._applied: dict[str, tuple] = {}
        self._waiting: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="repository-poller", daemon=True)

    def prime(self) -> None:
        """Remember the repository as loaded at startup, so the first poll only
        acts on what changes afterwards."""
        snapshot = self._scan()
        self._settle.prime(_prints(snapshot), self._poll_started_ns)
        self._seen = {v.path for m in snapshot.models.values() for v in m.versions.values()}
        for name, folder in snapshot.models.items():
            self._applied[name] = _key(folder)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def poll_once(self) -> None:
        snapshot = self._scan()
        settled = self._settle.settled(
            _prints(snapshot), self._poll_started_ns, self._arrived_by_rename(snapshot)
        )
        for name in sorted(set(self._applied) - set(snapshot.models)):
            log.info("model '%s': folder removed from the repository", name)
            self._applied.pop(name)
            try:
                self._manager.forget_model(name)
            except EdgeboxError as exc:
                log.warning("model '%s': unloading failed: %s", name, exc)
        for name, folder in snapshot.models.items():
            key = _key(folder)
            if self._applied.get(name) == key:
                continue
            waiting = [
                f"version {n}"
                for n, v in folder.versions.items()
                if v.path not in settled or self._written(v.path)
            ]
            config_path = folder.path / CONFIG_FILENAME
            if config_path not in settled or (config_path.exists() and self._written(config_path)):
                waiting.insert(0, CONFIG_FILENAME)
            if waiting:
                if self._waiting.get(name) != waiting:
                    log.info("model '%s': %s still changing; waiting", name, ", ".join(waiting))
                self._waiting[name] = waiting
                continue
            self._waiting.pop(name, None)
            self._applied[name] = key
            try:
                self._manager.load_model(name, folder=folder)
            except EdgeboxError as exc:
                log.warning("model '%s': %s", name, exc)

    def _arrived_by_rename(self, snapshot: RepositorySnapshot) -> set[Path]:
        """New version folders (and configs of new model folders) that carry a
        rename's mark and that no process is still writing: complete now."""
        arrived: set[Path] = set()
        for name, folder in snapshot.models.items():
            new_model = name not in self._applied
            for version in folder.versions.values():
                if version.path in self._seen:
                    continue
                marked = version.renamed_in or (new_model and folder.renamed_in)
                if marked and being_written(version.path) is False:
                    arrived.add(version.path)
            config_path = folder.path / CONFIG_FILENAME
            if new_model and folder.renamed_in and being_written(config_path) is False:
                arrived.add(config_path)
        self._seen = {v.path for m in snapshot.models.values() for v in m.versions.values()}
        return arrived

    def _written(self, path: Path) -> bool:
        """Still open for writing by some process (a copy that paused)."""
        answer = being_written(path)
        if answer is None and path not in self._unchecked:
            self._unchecked.add(path)
            log.debug(
                "cannot tell whether '%s' is still being written; trusting sizes and times", path
            )
        return bool(answer)

    def _scan(self) -> RepositorySnapshot:
        self._poll_started_ns = time.time_ns()
        return scan_repository(self._root)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.poll_once()
            except Exception:
                log.exception("repository poll failed; will poll again")


def _prints(snapshot: RepositorySnapshot) -> dict[Path, Fingerprint]:
    prints: dict[Path, Fingerprint] = {}
    for folder in snapshot.models.values():
        prints[folder.path / CONFIG_FILENAME] = folder.config_fingerprint
        for version in folder.versions.values():
            prints[version.path] = version.fingerprint
    return prints


def _key(folder: ModelFolder) -> tuple:
    versions = tuple((n, v.fingerprint) for n, v in sorted(folder.versions.items()))
    return folder.config_fingerprint, versions
