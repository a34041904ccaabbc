"""Versions on trial, trusted and held: the crash-quarantine half of
rollouts, and what every other decision records.

A version whose files were never trusted is on trial from the start of its
load until it has served for ``watch_s`` (immediate) or passed its rollout
and watch window; meanwhile its requests in flight are marked in the crash
marks, so that if the daemon dies the next start can tell which version to
blame (``recover``). A held version (rejected, rolled back, quarantined) is
left out of what the version policy may select until its files change or
an operator releases it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator

from edgebox.lifecycle.registry import ServedModel
from edgebox.lifecycle.rollout.crash_marks import SLOTS, CrashMarks, SlotMark, fatal_signal
from edgebox.lifecycle.rollout.store import Hold, RolloutStore, Trial, files_digest
from edgebox.repository.layout import ModelFolder

log = logging.getLogger(__name__)


class Trials:
    """Thread-safe (the store locks; ``_serving`` has its own lock)."""

    def __init__(
        self,
        store: RolloutStore,
        marks: CrashMarks,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._marks = marks
        self._clock = clock
        self._lock = threading.Lock()
        self._serving: dict[tuple[str, int], ServedModel] = {}
        """Versions on trial that take requests, until trusted or ended."""

    # -- what may load ------------------------------------------------------

    def holds(self, name: str, folder: ModelFolder) -> dict[int, str]:
        """Versions on disk that must not load (their files are the ones
        held), with the reason to show."""
        held = {}
        for version, hold in self._store.holds(name).items():
            entry = folder.versions.get(version)
            if entry is not None and files_digest(entry.fingerprint) == hold.digest:
                held[version] = hold.reason
        return held

    def held(self, name: str) -> dict[int, Hold]:
        return self._store.holds(name)

    def trusted(self, name: str, version: int, folder: ModelFolder) -> bool:
        entry = folder.versions.get(version)
        return entry is not None and self._store.trusted(
            name, version, files_digest(entry.fingerprint)
        )

    def baseline_for(
        self, name: str, folder: ModelFolder, below: int, held: set[int]
    ) -> int | None:
        """The newest trusted version on disk older than ``below``, to serve
        while ``below`` proves itself when nothing serves yet (a restart)."""
        for version in sorted(self._store.trusted_versions(name), reverse=True):
            if version < below and version not in held and self.trusted(name, version, folder):
                return version
        return None

    def digest(self, name: str, version: int) -> str:
        trial = self._trial(name, version)
        return trial.digest if trial is not None else ""

    # -- a version's trial ----------------------------------------------------

    @contextlib.contextmanager
    def loading(self, name: str, version: int, folder: ModelFolder) -> Iterator[None]:
        """Around the load of a version: one not trusted yet is on trial from
        here, marked as loading, so a crash during its load quarantines it.
        A load that fails (an exception, not a crash) ends the trial."""
        entry = folder.versions.get(version)
        digest = files_digest(entry.fingerprint) if entry is not None else ""
        if not digest or self._store.trusted(name, version, digest):
            yield
            return
        slot = self._begin(name, version, digest)
        if slot >= 0:
            self._marks.loading(slot, True)
        try:
            yield
        except BaseException:
            self.end(name, version)
            raise
        if slot >= 0:
            self._marks.loading(slot, False)

    def arm(self, served: ServedModel) -> None:
        """A version on trial, loaded and about to take requests (published or
        staged): its requests in flight are marked from the first one on."""
        trial = self._trial(served.name, served.version)
        if trial is not None and trial.slot >= 0:
            marks, slot = self._marks, trial.slot
            served.on_trial = lambda count, started: marks.inflight(slot, count, started)

    def serving(self, served: ServedModel, until: float) -> None:
        """``served`` takes requests on trial until ``until`` (0: until a
        rollout decides), then is trusted (``expire``)."""
        trial = self._trial(served.name, served.version)
        if trial is None:
            return
        if until:
            self._store.begin_trial(
                served.name, served.version, dataclasses.replace(trial, until=until)
            )
        if served.on_trial is None:
            self.arm(served)
        with self._lock:
            self._serving[(served.name, served.version)] = served

    def on_trial(self, name: str, version: int) -> bool:
        return self._trial(name, version) is not None

    def expire(self, now: float) -> None:
        """Trust every version whose trial ran its time without incident."""
        with self._lock:
            serving = list(self._serving.items())
        for (name, version), served in serving:
            trial = self._trial(name, version)
            if trial is None:
                with self._lock:
                    self._serving.pop((name, version), None)
            elif trial.until and now >= trial.until:
                self.trust(served)

    def trust(self, served: ServedModel) -> None:
        """``served`` proved itself: no longer on trial, a baseline from now on."""
        trial = self._trial(served.name, served.version)
        served.on_trial = None
        with self._lock:
            self._serving.pop((served.name, served.version), None)
        if trial is None:
            return
        if trial.slot >= 0:
            self._marks.clear(trial.slot)
        self._store.trust(served.name, served.version, trial.digest)

    def end(self, name: str, version: int) -> None:
        """The trial stops without a verdict (a failed load, a rollout ended)."""
        trial = self._trial(name, version)
        if trial is not None and trial.slot >= 0:
            self._marks.clear(trial.slot)
        self._store.end_trial(name, version)
        self._forget_serving(name, version)

    def hold(self, name: str, version: int, kind: str, reason: str, digest: str = "") -> None:
        """The version must not serve again with these files."""
        trial = self._trial(name, version)
        if trial is not None and trial.slot >= 0:
            self._marks.clear(trial.slot)
        digest = trial.digest if trial is not None else digest
        if digest:
            self._store.hold(name, version, Hold(digest, kind, reason, self._clock()))
        else:
            self._store.end_trial(name, version)
        self._forget_serving(name, version)

    def release(self, name: str) -> list[int]:
        return self._store.release(name)

    # -- crashes --------------------------------------------------------------

    def recover(self, fatal_report: str) -> list[tuple[str, int, str]]:
        """Before the first load: the versions on trial to blame for the last
        run's death (during this boot; ``culprits``) are held as quarantined.
        Returns (model, version, reason) for each."""
        signal_name = fatal_signal(fatal_report)
        died = f"the daemon died ({signal_name})" if signal_name else "the daemon died"
        busy = self._marks.previous
        quarantined = []
        for (name, version), trial in culprits(self._store.trials(), busy, fatal_report):
            mark = busy[trial.slot]
            doing = "loading" if mark.loading and not mark.inflight else "executing"
            at = time.strftime("%H:%M:%S", time.localtime(mark.last_started or trial.since))
            reason = (
                f"quarantined: {died} while version {version} was {doing} at {at}; "
                "remove the folder or release it"
            )
            self._store.hold(
                name, version, Hold(trial.digest, "quarantined", reason, self._clock())
            )
            log.error("model '%s' version %d: %s", name, version, reason)
            quarantined.append((name, version, reason))
        return quarantined

    def closed_cleanly(self) -> None:
        """Every version drained and closed at shutdown: nothing was left
        running, so the next start has nothing to quarantine."""
        self._marks.close()

    # -- internals ---------------------------------------------------------------

    def _trial(self, name: str, version: int) -> Trial | None:
        return self._store.trials(name).get((name, version))

    def _begin(self, name: str, version: int, digest: str) -> int:
        existing = self._trial(name, version)
        if existing is not None and existing.digest == digest:
            slot = existing.slot
        else:
            used = self._store.used_slots()
            slot = next((s for s in range(SLOTS) if s not in used), -1)
        self._store.begin_trial(name, version, Trial(digest, slot, self._clock()))
        if slot >= 0:
            self._marks.clear(slot)
        return slot

    def _forget_serving(self, name: str, version: int) -> None:
        with self._lock:
            served = self._serving.pop((name, version), None)
        if served is not None:
            served.on_trial = None


def culprits(
    trials: dict[tuple[str, int], Trial], busy: dict[int, SlotMark], fatal_report: str
) -> list[tuple[tuple[str, int], Trial]]:
    """The versions on trial to blame for the last run's death: those busy
    (loading or running) when it died, at most one per model. The fault
    report's crashing thread names the version folder when a python model
    crashed; otherwise the newest busy version of a model is the likelier
    cause (the older one served without incident before it came)."""
    crashing = fatal_report.split("Current thread", 1)[-1].split("\n\nThread ", 1)[0]
    by_model: dict[str, list[tuple[int, Trial]]] = {}
    for (name, version), trial in trials.items():
        if trial.slot in busy:
            by_model.setdefault(name, []).append((version, trial))
    chosen = []
    for name, versions in by_model.items():
        named = [(v, t) for v, t in versions if f"/{name}/{v}/" in crashing]
        version, trial = max(named or versions, key=lambda item: item[0])
        chosen.append(((name, version), trial))
    return chosen
