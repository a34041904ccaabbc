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

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from edgebox.errors import EdgeboxError, InvalidArgument, NotFound
from edgebox.events import (
    EventBus,
    ModelQuarantined,
    RolloutProgress,
    RolloutPromoted,
    RolloutRejected,
    RolloutRolledBack,
    RolloutStarted,
)
from edgebox.events.rollout import RolloutEvent
from edgebox.lifecycle.registry import CanaryRoute, ModelRegistry, ServedModel
from edgebox.lifecycle.rollout.compare import comparer_for
from edgebox.lifecycle.rollout.crash_marks import CrashMarks
from edgebox.lifecycle.rollout.gates import Figures, Tally, judge
from edgebox.lifecycle.rollout.observers import candidate_observer, serving_observer
from edgebox.lifecycle.rollout.progress import (
    Outcome,
    Rollout,
    figures_document,
    watch_failure,
)
from edgebox.lifecycle.rollout.shadow import ShadowRunner
from edgebox.lifecycle.rollout.store import RolloutStore
from edgebox.lifecycle.rollout.trials import Trials
from edgebox.lifecycle.states import ModelState
from edgebox.repository.layout import ModelFolder
from edgebox.repository.rollout_policy import RolloutPolicy, policy_of, unsplittable

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
        self.trials = Trials(store or RolloutStore(None), marks or CrashMarks(None), clock)
        self._bus = bus
        self.default_policy = default_policy or RolloutPolicy()
        self._park_rolled_back = park_rolled_back
        self._previous_fatal = previous_fatal
        self._clock = clock
        self._lock = threading.Lock()
        self._active: dict[str, Rollout] = {}
        self._overrides: dict[str, RolloutPolicy] = {}
        """Model -> the policy a fleet's desired state gave its new version."""
        self._outcomes: dict[str, Outcome] = {}
        self._totals: dict[str, dict[str, int]] = {}
        """Per model since start: samples compared and dropped by rollouts that
        ended, and how many ended each way (the metrics' counters)."""
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

    def set_policy_override(self, model: str, policy: RolloutPolicy | None) -> None:
        """From now on, ``model``'s new versions roll out under ``policy``
        instead of the device's default and the config's ``rollout*``
        parameters (None: those again). The fleet agent sets it before it
        publishes a version whose desired state names a policy; a rollout
        already in progress keeps the policy it started with."""
        with self._lock:
            if policy is None:
                self._overrides.pop(model, None)
            else:
                self._overrides[model] = policy

    def policy_for(self, name: str, config) -> RolloutPolicy:
        """The policy set for the model (``set_policy_override``), else the
        device's default under the config's own ``rollout*`` parameters. A
        shadow or canary does not apply to a model whose requests cannot be
        copied or split (a sequence, a decoupled model): those roll out
        immediately."""
        with self._lock:
            override = self._overrides.get(name)
        policy = override if override is not None else policy_of(config, self.default_policy)
        if policy.policy != "immediate" and unsplittable(config):
            return RolloutPolicy(policy="immediate", watch_s=policy.watch_s)
        return policy

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
        if newest in serving or self.trials.trusted(name, newest, folder):
            return None, None
        if serving:
            current = max(serving)
            return (newest, current) if current < newest else (None, None)
        baseline = self.trials.baseline_for(name, folder, newest, held)
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

    def published(self, served: ServedModel) -> None:
        """A version that serves at once (``immediate``): on trial for
        ``watch_s`` if not trusted yet, then trusted."""
        self.trials.serving(
            served, self._clock() + self.policy_for(served.name, served.config).watch_s
        )

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
            self.trials.end(candidate.name, candidate.version)
            raise EdgeboxError(f"{candidate.where}: rollout: {exc}", exc.code) from None
        rollout = Rollout(
            candidate.name,
            candidate,
            serving,
            policy,
            self.trials.digest(candidate.name, candidate.version),
            started=self._clock(),
            stage=policy.policy,
        )
        self.trials.serving(candidate, 0.0)
        if policy.policy == "shadow":
            rollout.shadow = ShadowRunner(
                candidate, compare, rollout.tally, self._wake.set, policy.samples
            )
            serving.observer = serving_observer(rollout.tally, rollout.shadow)
        else:
            serving.observer = serving_observer(rollout.tally, None)
            candidate.observer = candidate_observer(rollout.tally, self._canary_failed(rollout))
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
        self.trials.end(name, rollout.candidate.version)
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
        """Before the first load: quarantine what the last run died running
        (``Trials.recover``), and say so on the bus."""
        quarantined = self.trials.recover(self._previous_fatal)
        for name, version, reason in quarantined:
            with self._lock:
                self._outcomes[name] = Outcome(version, "quarantined", reason, self._clock())
                self._totals.setdefault(name, dict(_NO_TOTALS))["quarantined"] += 1
            if self._bus is not None:
                self._bus.publish(ModelQuarantined(name, version, reason))
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
        self.trials.closed_cleanly()

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
            document.update(figures_document(rollout))
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
            for version, hold in sorted(self.trials.held(name).items())
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
        released = self.trials.release(name)
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
        for rollout in rollouts:
            if rollout.stage == "watching":
                self._check_watch(rollout, now)
            else:
                self._check_rollout(rollout, now)
        self.trials.expire(now)

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
        failure = watch_failure(rollout)
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
        self.trials.trust(rollout.candidate)
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
        rollout.candidate.observer = candidate_observer(rollout.watch, self._wake.set)
        rollout.candidate.notes = [f"rollout: promoted ({reason})"]
        self._registry.publish(rollout.candidate)
        self.trials.serving(rollout.candidate, rollout.watch_until)
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
        self.trials.hold(
            rollout.name, rollout.candidate.version, "rejected", reason, rollout.digest
        )
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
            self.trials.hold(
                rollout.name, rollout.candidate.version, "rolled_back", text, rollout.digest
            )
        else:
            self.trials.end(rollout.name, rollout.candidate.version)
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

    def _canary_failed(self, rollout: Rollout):
        """A canary that fails more than its gate allows stops taking
        requests on the failing request's own thread, before the rollout
        thread gets to judge it, so clients meet as few of its failures as
        the gate permits."""

        def failed() -> None:
            verdict = judge(rollout.tally.figures(), rollout.policy, compared=False)
            if verdict is not None and not verdict.passed:
                self._registry.route_canary(rollout.name, None)
            self._wake.set()

        return failed

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
