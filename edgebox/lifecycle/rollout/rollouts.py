"""Every new version proves itself on live data before it serves: the
rollouts in progress, the watch windows after a promotion, the versions on
trial, and the holds that keep a rejected or crashing version from serving
again after a restart.

The lifecycle manager asks this module, as it loads a model, which versions
are held, whether the new default version is a candidate, and which old
version must stay loaded meanwhile; it hands over a loaded candidate instead
of publishing it. From then on this module decides: a thread of its own
judges each rollout's figures (gates.py) and promotes, rejects or rolls back
as the one operation on that model (the manager's lock), then asks the
manager to reconcile the model with its version policy (which retires what
is no longer kept). Requests never wait on any of it: they meet only the
observers and the canary route, set and cleared here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, NotFound
from edgebox.events import (
    EventBus,
    ModelQuarantined,
    RolloutEvent,
    RolloutProgress,
    RolloutPromoted,
    RolloutRejected,
    RolloutRolledBack,
    RolloutStarted,
)
from edgebox.lifecycle.registry import CanaryRoute, ModelRegistry, ServedModel
from edgebox.lifecycle.rollout.compare import comparer_for
from edgebox.lifecycle.rollout.crash_marks import SLOTS, CrashMarks, fatal_signal
from edgebox.lifecycle.rollout.gates import Figures, Tally, Verdict, judge
from edgebox.lifecycle.rollout.shadow import ShadowRunner
from edgebox.lifecycle.rollout.store import Hold, RolloutStore, Trial, files_digest
from edgebox.lifecycle.states import ModelState
from edgebox.repository.layout import ModelFolder
from edgebox.repository.rollout_policy import RolloutPolicy, policy_of, unsplittable
from edgebox.tensors import InferRequest, InferResponse

log = logging.getLogger(__name__)

_NO_TOTALS = {
    "samples": 0,
    "dropped": 0,
    "promoted": 0,
    "rejected": 0,
    "rolled_back": 0,
    "quarantined": 0,
}

TICK_S = 0.5
"""How often the rollout thread looks at figures when nothing wakes it."""
PROGRESS_EVERY_S = 5.0
"""Least time between two progress events (and reason updates) of one rollout."""


@dataclass
class Rollout:
    """One candidate proving itself against the serving version."""

    name: str
    candidate: ServedModel
    serving: ServedModel
    policy: RolloutPolicy
    digest: str
    started: float = field(default_factory=time.time)
    tally: Tally = field(default_factory=Tally)
    shadow: ShadowRunner | None = None
    stage: str = ""
    """The policy (``shadow``/``canary``) until promoted, then ``watching``."""
    watch: Tally | None = None
    watch_until: float = 0.0
    decided: Figures | None = None
    """The rollout's figures when it was promoted (what the watch compares to)."""
    last_progress: float = 0.0

    @property
    def key(self) -> tuple[int, tuple]:
        return self.candidate.version, self.candidate.source


@dataclass(frozen=True)
class Outcome:
    """How a model's last rollout ended, for the status resource."""

    version: int
    result: str
    reason: str
    at: float


class Rollouts:
    """Thread-safe. ``attach`` must be called (by the manager) before use."""

    def __init__(
        self,
        registry: ModelRegistry,
        store: RolloutStore | None = None,
        marks: CrashMarks | None = None,
        bus: EventBus | None = None,
        default_policy: RolloutPolicy | None = None,
        park_rolled_back: bool = False,
        previous_fatal: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._store = store or RolloutStore(None)
        self._marks = marks or CrashMarks(None)
        self._bus = bus
        self.default_policy = default_policy or RolloutPolicy()
        self._park_rolled_back = park_rolled_back
        self._previous_fatal = previous_fatal
        self._clock = clock
        self._lock = threading.Lock()
        self._active: dict[str, Rollout] = {}
        self._outcomes: dict[str, Outcome] = {}
        self._totals: dict[str, dict[str, int]] = {}
        """Per model since start: samples compared and dropped by rollouts that
        ended, and how many ended each way (the metrics' counters)."""
        self._trial_versions: dict[tuple[str, int], ServedModel] = {}
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._operate: Callable[[str, Callable[[], None]], None] = lambda _n, fn: fn()
        self._reconcile: Callable[[str], None] = lambda _n: None
        self._close: Callable[[ServedModel], None] = lambda served: served.close()
        self._retire: Callable[[ServedModel, str], None] = lambda served, _r: served.close()
        self._park: Callable[[str, int], list[int]] = lambda _n, _v: []

    def attach(
        self,
        operate: Callable[[str, Callable[[], None]], None],
        reconcile: Callable[[str], None],
        close: Callable[[ServedModel], None],
        retire: Callable[[ServedModel, str], None],
        park: Callable[[str, int], list[int]],
    ) -> None:
        """The manager's verbs: run a function as the one operation on a model;
        reconcile a model with its version policy (outside any operation);
        close a version nobody can reach; retire a withdrawn one; park the
        version folders newer than a version (poll mode's rollback)."""
        self._operate = operate
        self._reconcile = reconcile
        self._close = close
        self._retire = retire
        self._park = park

    # -- asked by the manager while it loads -------------------------------

    def policy_for(self, config) -> RolloutPolicy:
        """The device's default under the config's own ``rollout*``
        parameters. A device-wide shadow or canary does not apply to a model
        whose requests cannot be copied or split (a sequence, a decoupled
        model): those roll out immediately."""
        policy = policy_of(config, self.default_policy)
        if policy.policy != "immediate" and unsplittable(config):
            return RolloutPolicy(policy="immediate", watch_s=policy.watch_s)
        return policy

    def holds(self, name: str, folder: ModelFolder) -> dict[int, str]:
        """Versions on disk that must not load (their files are the ones
        held), with the reason to show."""
        held = {}
        for version, hold in self._store.holds(name).items():
            entry = folder.versions.get(version)
            if entry is not None and files_digest(entry.fingerprint) == hold.digest:
                held[version] = hold.reason
        return held

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

    def plan(
        self,
        name: str,
        policy: RolloutPolicy,
        folder: ModelFolder,
        wanted: list[int],
        serving: dict[int, ServedModel],
        held: set[int],
    ) -> tuple[int | None, int | None]:
        """(candidate, baseline): the new default version that must prove
        itself and the version that serves meanwhile; (None, None) when the
        new default serves at once: the policy is ``immediate``, the version
        is trusted already, it replaces a version of the same number in
        place, or no older version can serve beside it."""
        if policy.policy == "immediate" or not wanted:
            return None, None
        newest = max(wanted)
        if newest in serving or self.trusted(name, newest, folder):
            return None, None
        if serving:
            current = max(serving)
            return (newest, current) if current < newest else (None, None)
        baseline = self.baseline_for(name, folder, newest, held)
        return (newest, baseline) if baseline is not None else (None, None)

    def active(self, name: str) -> Rollout | None:
        with self._lock:
            rollout = self._active.get(name)
        return rollout if rollout is not None and rollout.stage != "watching" else None

    def kept(self, name: str) -> dict[int, str]:
        """Versions the version policy no longer selects that stay loaded
        while a rollout or its watch window may still need them."""
        with self._lock:
            rollout = self._active.get(name)
        if rollout is None:
            return {}
        if rollout.stage == "watching":
            until = time.strftime("%H:%M:%S", time.localtime(rollout.watch_until))
            why = (
                f"previous version, kept loaded while version {rollout.candidate.version} "
                f"is watched (until {until})"
            )
        else:
            why = f"serving while version {rollout.candidate.version} is in rollout"
        return {rollout.serving.version: why}

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
        slot = self._begin_trial(name, version, digest)
        if slot >= 0:
            self._marks.loading(slot, True)
        try:
            yield
        except BaseException:
            self._end_trial(name, version, slot)
            raise
        if slot >= 0:
            self._marks.loading(slot, False)

    def arm(self, served: ServedModel) -> None:
        """A version on trial, loaded and about to take requests (published or
        staged): its requests in flight are marked from the first one on."""
        trial = self._store.trials(served.name).get((served.name, served.version))
        if trial is not None and trial.slot >= 0:
            marks, slot = self._marks, trial.slot
            served.on_trial = lambda count, started: marks.inflight(slot, count, started)

    def published(self, served: ServedModel, folder: ModelFolder) -> None:
        """A version that serves at once (``immediate``): on trial for
        ``watch_s`` if not trusted yet, then trusted."""
        trial = self._store.trials(served.name).get((served.name, served.version))
        if trial is None:
            return
        policy = self.policy_for(served.config)
        self._watch_trial(served, trial, self._clock() + policy.watch_s)

    def start(
        self, candidate: ServedModel, serving: ServedModel, policy: RolloutPolicy, model_dir: Path
    ) -> None:
        """Put a loaded candidate on trial against ``serving``; the caller is
        the one operation on the model and has not published it. A custom
        comparison rule that cannot be imported fails the candidate's load
        (EdgeboxError), the candidate closed."""
        try:
            compare = comparer_for(policy, model_dir)
        except EdgeboxError as exc:
            self._close(candidate)
            self._end_trial(candidate.name, candidate.version, -1)
            raise EdgeboxError(f"{candidate.where}: rollout: {exc}", exc.code) from None
        trial = self._store.trials(candidate.name).get((candidate.name, candidate.version))
        rollout = Rollout(
            candidate.name,
            candidate,
            serving,
            policy,
            trial.digest if trial is not None else "",
            started=self._clock(),
            stage=policy.policy,
        )
        if trial is not None:
            self._watch_trial(candidate, trial, 0.0)
        if policy.policy == "shadow":
            rollout.shadow = ShadowRunner(
                candidate, compare, rollout.tally, self._wake.set, policy.samples
            )
            serving.observer = self._serving_observer(rollout)
        else:
            serving.observer = self._serving_observer(rollout)
            candidate.observer = self._candidate_observer(rollout.tally, rollout)
            self._registry.route_canary(
                candidate.name, CanaryRoute(candidate, policy.canary_percent)
            )
        with self._lock:
            self._active[candidate.name] = rollout
        self._set_candidate_status(rollout, force=True)
        self._publish(RolloutStarted, rollout, "")
        log.info(
            "model '%s': version %d in %s rollout against version %d (%d samples)",
            rollout.name,
            candidate.version,
            policy.policy,
            serving.version,
            policy.samples,
        )

    def end(self, name: str, reason: str) -> None:
        """Stop a rollout in progress without judging it (superseded, the
        model unloaded, its folder gone): the candidate is closed, nothing
        is held. The caller is the one operation on the model."""
        with self._lock:
            rollout = self._active.get(name)
            if rollout is None or rollout.stage == "watching":
                return
            del self._active[name]
            figures = rollout.tally.figures()
            totals = self._totals.setdefault(name, dict(_NO_TOTALS))
            totals["samples"] += figures.samples
            totals["dropped"] += figures.dropped
        self._detach(rollout)
        self._close(rollout.candidate)
        self._end_trial(name, rollout.candidate.version, -1)
        self._registry.clear_status(name, rollout.candidate.version)
        log.info(
            "model '%s': rollout of version %d ended: %s", name, rollout.candidate.version, reason
        )

    def forget(self, name: str) -> None:
        """The model is unloaded or gone: end its rollout or watch."""
        self.end(name, "model unloaded")
        with self._lock:
            rollout = self._active.pop(name, None)
        if rollout is not None:
            rollout.candidate.observer = None

    # -- startup -------------------------------------------------------------

    def recover(self) -> list[tuple[str, int, str]]:
        """Before the first load: the versions on trial to blame for the last
        run's death (during this boot; ``_culprits``) are quarantined.
        Returns (model, version, reason) for each."""
        signal_name = fatal_signal(self._previous_fatal)
        died = f"the daemon died ({signal_name})" if signal_name else "the daemon died"
        quarantined = []
        for (name, version), trial in _culprits(
            self._store.trials(), self._marks.previous, self._previous_fatal
        ):
            mark = self._marks.previous[trial.slot]
            doing = "loading" if mark.loading and not mark.inflight else "executing"
            at = time.strftime("%H:%M:%S", time.localtime(mark.last_started or trial.since))
            reason = (
                f"quarantined: {died} while version {version} was {doing} at {at}; "
                "remove the folder or release it"
            )
            self._store.hold(
                name, version, Hold(trial.digest, "quarantined", reason, self._clock())
            )
            with self._lock:
                self._outcomes[name] = Outcome(version, "quarantined", reason, self._clock())
                self._totals.setdefault(name, dict(_NO_TOTALS))["quarantined"] += 1
            if self._bus is not None:
                self._bus.publish(ModelQuarantined(name, version, reason))
            log.error("model '%s' version %d: %s", name, version, reason)
            quarantined.append((name, version, reason))
        return quarantined

    def start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rollout", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        with self._lock:
            rollouts = list(self._active.values())
        for rollout in rollouts:
            if rollout.shadow is not None:
                rollout.shadow.stop()

    def closed_cleanly(self) -> None:
        """Every version drained and closed at shutdown: nothing was left
        running, so the next start has nothing to quarantine."""
        self._marks.close()

    # -- the operator's verbs -------------------------------------------------

    def status(self, name: str) -> dict:
        """The rollout resource: the policy, the stage and figures of a
        rollout in progress or watch window, how the last one ended, and
        the versions held."""
        with self._lock:
            rollout = self._active.get(name)
            outcome = self._outcomes.get(name)
        document: dict = {"model": name, "stage": "none"}
        if rollout is not None:
            document.update(_figures_document(rollout))
        if outcome is not None:
            document["last"] = {
                "version": outcome.version,
                "result": outcome.result,
                "reason": outcome.reason,
                "at": outcome.at,
            }
        document["totals"] = self._totals_of(name, rollout)
        document["held"] = [
            {"version": version, "kind": hold.kind, "reason": hold.reason, "since": hold.since}
            for version, hold in sorted(self._store.holds(name).items())
        ]
        return document

    def _totals_of(self, name: str, rollout: Rollout | None) -> dict[str, int]:
        with self._lock:
            totals = dict(self._totals.get(name, _NO_TOTALS))
        if rollout is not None and rollout.stage != "watching":
            figures = rollout.tally.figures()
            totals["samples"] += figures.samples
            totals["dropped"] += figures.dropped
        return totals

    def known(self) -> list[str]:
        """Models that had a rollout, a watch or a hold since start."""
        with self._lock:
            return sorted(set(self._active) | set(self._totals) | set(self._outcomes))

    def statuses(self) -> list[dict]:
        with self._lock:
            names = sorted(self._active)
        return [self.status(name) for name in names]

    def promote(self, name: str) -> dict:
        """Promote the candidate now, whatever its figures (the operator's call)."""
        rollout = self._require(name)
        self._operate(name, lambda: self._promote(rollout, "promoted by the operator"))
        self._reconcile(name)
        return self.status(name)

    def abort(self, name: str) -> dict:
        """Reject the candidate now, or during a watch window roll back to
        the previous version now; either is held (or parked) until released."""
        with self._lock:
            watched = self._active.get(name)
        if watched is not None and watched.stage == "watching":
            self._operate(name, lambda: self._roll_back(watched, "by the operator"))
        else:
            rollout = self._require(name)
            self._operate(name, lambda: self._reject(rollout, "rollout: aborted by the operator"))
        self._reconcile(name)
        return self.status(name)

    def release(self, name: str) -> dict:
        """Let a held (rejected, rolled back, quarantined) version of the model
        be loaded again; it goes through a rollout like any new version."""
        released = self._store.release(name)
        if not released:
            raise NotFound(f"model '{name}': no version is held")
        log.info("model '%s': version(s) %s released by the operator", name, released)
        for version in released:
            self._registry.clear_status(name, version)
        self._reconcile(name)
        return self.status(name)

    def _require(self, name: str) -> Rollout:
        rollout = self.active(name)
        if rollout is None:
            raise InvalidArgument(f"model '{name}': no rollout in progress")
        return rollout

    # -- the rollout thread -------------------------------------------------

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(TICK_S)
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                self._tick()
            except Exception:
                log.exception("rollout: a check failed")

    def _tick(self) -> None:
        now = self._clock()
        with self._lock:
            rollouts = list(self._active.values())
            trials = list(self._trial_versions.items())
        for rollout in rollouts:
            if rollout.stage == "watching":
                self._check_watch(rollout, now)
            else:
                self._check_rollout(rollout, now)
        for (name, version), served in trials:
            trial = self._store.trials(name).get((name, version))
            if trial is None:
                with self._lock:
                    self._trial_versions.pop((name, version), None)
                continue
            if trial.until and now >= trial.until:
                self._trust(served, trial)

    def _check_rollout(self, rollout: Rollout, now: float) -> None:
        figures = rollout.tally.figures()
        verdict = judge(figures, rollout.policy, compared=rollout.stage == "shadow")
        if verdict is None:
            if now - rollout.last_progress >= PROGRESS_EVERY_S:
                rollout.last_progress = now
                self._set_candidate_status(rollout)
                if figures.samples:
                    self._publish(RolloutProgress, rollout, "")
            return
        if verdict.passed:
            self._operate(rollout.name, lambda: self._promote(rollout, verdict.reason))
        else:
            self._operate(rollout.name, lambda: self._reject(rollout, verdict.reason))
        self._reconcile(rollout.name)

    def _check_watch(self, rollout: Rollout, now: float) -> None:
        failure = _watch_failure(rollout)
        if failure is not None:
            self._operate(rollout.name, lambda: self._roll_back(rollout, failure))
            self._reconcile(rollout.name)
            return
        if now < rollout.watch_until:
            return
        with self._lock:
            if self._active.get(rollout.name) is not rollout:
                return
            del self._active[rollout.name]
        rollout.candidate.observer = None
        trial = self._store.trials(rollout.name).get((rollout.name, rollout.candidate.version))
        if trial is not None:
            self._trust(rollout.candidate, trial)
        log.info(
            "model '%s': version %d passed its watch window",
            rollout.name,
            rollout.candidate.version,
        )
        self._reconcile(rollout.name)

    # -- decisions (each the one operation on its model) ----------------------

    def _promote(self, rollout: Rollout, reason: str) -> None:
        with self._lock:
            if self._active.get(rollout.name) is not rollout or rollout.stage == "watching":
                return
        self._detach(rollout)
        rollout.decided = rollout.tally.figures()
        rollout.watch = Tally()
        rollout.watch_until = self._clock() + rollout.policy.watch_s
        rollout.stage = "watching"
        rollout.candidate.observer = self._candidate_observer(rollout.watch)
        rollout.candidate.notes = [f"rollout: promoted ({reason})"]
        self._registry.publish(rollout.candidate)
        trial = self._store.trials(rollout.name).get((rollout.name, rollout.candidate.version))
        if trial is not None:
            self._watch_trial(rollout.candidate, trial, rollout.watch_until)
        self._registry.set_status(
            rollout.name,
            rollout.serving.version,
            ModelState.READY,
            self.kept(rollout.name)[rollout.serving.version],
        )
        self._outcome(rollout, "promoted", reason)
        self._publish(RolloutPromoted, rollout, reason, rollout.decided)
        log.info(
            "model '%s': version %d promoted: %s", rollout.name, rollout.candidate.version, reason
        )

    def _reject(self, rollout: Rollout, reason: str) -> None:
        with self._lock:
            if self._active.get(rollout.name) is not rollout or rollout.stage == "watching":
                return
            del self._active[rollout.name]
        self._detach(rollout)
        figures = rollout.tally.figures()
        self._close(rollout.candidate)
        self._hold(rollout, "rejected", reason)
        self._registry.set_status(
            rollout.name, rollout.candidate.version, ModelState.UNAVAILABLE, reason
        )
        self._serving_again(rollout)
        self._outcome(rollout, "rejected", reason)
        self._publish(RolloutRejected, rollout, reason, figures)
        log.warning(
            "model '%s': version %d rejected: %s", rollout.name, rollout.candidate.version, reason
        )

    def _roll_back(self, rollout: Rollout, reason: str) -> None:
        with self._lock:
            if self._active.get(rollout.name) is not rollout:
                return
            del self._active[rollout.name]
        rollout.candidate.observer = None
        figures = rollout.decided or rollout.tally.figures()
        withdrawn = self._registry.withdraw(rollout.name, [rollout.candidate.version])
        text = f"rolled back to version {rollout.serving.version}: {reason}"
        for served in withdrawn:
            self._retire(served, text)
        parked: list[int] = []
        if self._park_rolled_back:
            try:
                parked = self._park(rollout.name, rollout.serving.version)
            except EdgeboxError as exc:
                log.error("model '%s': rollback could not park its folders: %s", rollout.name, exc)
        if rollout.candidate.version not in parked:
            self._hold(rollout, "rolled_back", text)
        else:
            self._end_trial(rollout.name, rollout.candidate.version, -1)
        self._serving_again(rollout)
        self._outcome(rollout, "rolled_back", text)
        self._publish(RolloutRolledBack, rollout, text, figures)
        log.warning("model '%s': version %d %s", rollout.name, rollout.candidate.version, text)

    # -- helpers -----------------------------------------------------------

    def _serving_again(self, rollout: Rollout) -> None:
        serving = rollout.serving
        if self._registry.served_versions(rollout.name).get(serving.version) is serving:
            self._registry.set_status(
                rollout.name, serving.version, ModelState.READY, "; ".join(serving.notes)
            )

    def _detach(self, rollout: Rollout) -> None:
        """Requests stop reaching the rollout's observers and canary route."""
        rollout.serving.observer = None
        rollout.candidate.observer = None
        self._registry.route_canary(rollout.name, None)
        if rollout.shadow is not None:
            rollout.shadow.stop()

    def _serving_observer(self, rollout: Rollout):
        tally = rollout.tally

        def observe(
            request: InferRequest,
            response: InferResponse | None,
            seconds: float,
            error: BaseException | None,
        ) -> None:
            failed = error is not None and not _client_mistake(error)
            if error is not None and not failed:
                return
            tally.serving(seconds, failed)
            if response is not None and rollout.shadow is not None:
                rollout.shadow.offer(request, response)

        return observe

    def _candidate_observer(self, tally: Tally, canary: Rollout | None = None):
        """Counts the new version's answers. A canary that fails more than
        its gate allows stops taking requests on the failing request's own
        thread, before the rollout thread gets to judge it, so clients meet
        as few of its failures as the gate permits."""
        wake = self._wake
        registry = self._registry

        def observe(
            request: InferRequest,
            response: InferResponse | None,
            seconds: float,
            error: BaseException | None,
        ) -> None:
            if error is not None and _client_mistake(error):
                return
            tally.candidate(seconds, "" if error is None else str(error) or type(error).__name__)
            if error is None:
                return
            if canary is not None:
                verdict = judge(tally.figures(), canary.policy, compared=False)
                if verdict is not None and not verdict.passed:
                    registry.route_canary(canary.name, None)
            wake.set()

        return observe

    def _set_candidate_status(self, rollout: Rollout, force: bool = False) -> None:
        figures = rollout.tally.figures()
        wanted = rollout.policy.samples
        if not figures.samples:
            text = f"rollout: {rollout.stage}, waiting for live traffic, 0/{wanted} samples"
        else:
            text = f"rollout: {rollout.stage}, {figures.samples}/{wanted} samples"
            if rollout.stage == "shadow":
                text += f", {figures.agreed} agree"
            if figures.dropped:
                text += f", {figures.dropped} dropped while busy"
        self._registry.set_status(rollout.name, rollout.candidate.version, ModelState.LOADING, text)

    def _begin_trial(self, name: str, version: int, digest: str) -> int:
        existing = self._store.trials(name).get((name, version))
        if existing is not None and existing.digest == digest:
            slot = existing.slot
        else:
            used = self._store.used_slots()
            slot = next((s for s in range(SLOTS) if s not in used), -1)
        self._store.begin_trial(name, version, Trial(digest, slot, self._clock()))
        if slot >= 0:
            self._marks.clear(slot)
        return slot

    def _watch_trial(self, served: ServedModel, trial: Trial, until: float) -> None:
        if until:
            self._store.begin_trial(
                served.name, served.version, dataclasses.replace(trial, until=until)
            )
        if trial.slot >= 0:
            marks, slot = self._marks, trial.slot
            served.on_trial = lambda count, started: marks.inflight(slot, count, started)
        with self._lock:
            self._trial_versions[(served.name, served.version)] = served

    def _trust(self, served: ServedModel, trial: Trial) -> None:
        served.on_trial = None
        if trial.slot >= 0:
            self._marks.clear(trial.slot)
        self._store.trust(served.name, served.version, trial.digest)
        with self._lock:
            self._trial_versions.pop((served.name, served.version), None)

    def _end_trial(self, name: str, version: int, slot: int) -> None:
        trial = self._store.trials(name).get((name, version))
        if trial is not None:
            slot = trial.slot
        if slot >= 0:
            self._marks.clear(slot)
        self._store.end_trial(name, version)
        with self._lock:
            served = self._trial_versions.pop((name, version), None)
        if served is not None:
            served.on_trial = None

    def _hold(self, rollout: Rollout, kind: str, reason: str) -> None:
        rollout.candidate.on_trial = None
        trial = self._store.trials(rollout.name).get((rollout.name, rollout.candidate.version))
        if trial is not None and trial.slot >= 0:
            self._marks.clear(trial.slot)
        digest = trial.digest if trial is not None else rollout.digest
        if digest:
            self._store.hold(
                rollout.name, rollout.candidate.version, Hold(digest, kind, reason, self._clock())
            )
        with self._lock:
            self._trial_versions.pop((rollout.name, rollout.candidate.version), None)

    def _outcome(self, rollout: Rollout, result: str, reason: str) -> None:
        figures = rollout.tally.figures()
        with self._lock:
            self._outcomes[rollout.name] = Outcome(
                rollout.candidate.version, result, reason, self._clock()
            )
            totals = self._totals.setdefault(rollout.name, dict(_NO_TOTALS))
            totals[result] += 1
            if result != "rolled_back":
                totals["samples"] += figures.samples
                totals["dropped"] += figures.dropped

    def _publish(
        self,
        kind: type[RolloutEvent],
        rollout: Rollout,
        reason: str,
        figures: Figures | None = None,
    ) -> None:
        if self._bus is None:
            return
        figures = figures or rollout.tally.figures()
        self._bus.publish(
            kind(
                model=rollout.name,
                version=rollout.candidate.version,
                serving_version=rollout.serving.version,
                policy=rollout.policy.policy,
                samples=figures.samples,
                samples_wanted=rollout.policy.samples,
                agreement=figures.agreement if rollout.policy.policy == "shadow" else None,
                candidate_p95_ms=figures.candidate_p95_ms,
                serving_p95_ms=figures.serving_p95_ms,
                errors=figures.candidate_errors,
                dropped=figures.dropped,
                reason=reason,
            )
        )


def _culprits(
    trials: dict[tuple[str, int], Trial], busy: dict, fatal_report: str
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


def _watch_failure(rollout: Rollout) -> str | None:
    """Why the promoted version must go, judged on its last ``samples``
    answers against what the serving version showed during the rollout."""
    assert rollout.watch is not None and rollout.decided is not None
    policy = rollout.policy
    decided = rollout.decided
    base_rate = (
        decided.serving_errors / decided.serving_requests if decided.serving_requests else 0.0
    )
    errors, answered = rollout.watch.recent_errors(policy.samples)
    allowed = int((base_rate + policy.max_error_rate) * policy.samples + 1e-9)
    if errors > allowed:
        return (
            f"{errors} of its last {answered} requests failed after promotion "
            f"(allowed {allowed}): {rollout.watch.figures().first_error}"
        )
    figures = rollout.watch.figures()
    if answered >= policy.samples and decided.serving_p95_ms is not None:
        verdict: Verdict | None = judge(
            figures._replace(candidate_errors=errors, samples=answered),
            policy,
            compared=False,
            serving_error_rate=base_rate,
            serving_p95_ms=decided.serving_p95_ms,
        )
        if verdict is not None and not verdict.passed:
            return verdict.reason.removeprefix("rollout: ") + " after promotion"
    return None


def _figures_document(rollout: Rollout) -> dict:
    figures = rollout.tally.figures() if rollout.stage != "watching" else rollout.decided
    document = {
        "stage": rollout.stage,
        "policy": rollout.policy.policy,
        "version": rollout.candidate.version,
        "serving_version": rollout.serving.version,
        "started": rollout.started,
        "samples": figures.samples if figures else 0,
        "samples_wanted": rollout.policy.samples,
        "agreed": figures.agreed if figures else 0,
        "agreement": figures.agreement if figures and rollout.policy.policy == "shadow" else None,
        "errors": figures.candidate_errors if figures else 0,
        "dropped": figures.dropped if figures else 0,
        "candidate_p95_ms": figures.candidate_p95_ms if figures else None,
        "serving_p95_ms": figures.serving_p95_ms if figures else None,
        "last_disagreement": figures.last_disagreement if figures else "",
        "gates": rollout.policy.describe(),
    }
    if rollout.stage == "watching" and rollout.watch is not None:
        watch = rollout.watch.figures()
        document["watch"] = {
            "until": rollout.watch_until,
            "requests": watch.samples,
            "errors": watch.candidate_errors,
            "p95_ms": watch.candidate_p95_ms,
        }
    return document


def _client_mistake(error: BaseException) -> bool:
    """A request the model refused as invalid is the client's failure, not
    the version's; neither is one cancelled by its client."""
    code = getattr(error, "code", None)
    return code in (ErrorCode.INVALID_ARG, ErrorCode.CANCELLED)
