"""What is loaded: (model, version) -> ServedModel, plus each version's state
and reason.

Requests look versions up here; the lifecycle manager publishes and withdraws
them. A lookup counts the request as in flight on the version it got, under the
same lock that withdrawal takes, so a withdrawn version can always tell when
its last request has finished (Triton's ``ModelDeleter`` idea).

A published version whose scheduler stopped serving (``Scheduler.failure``)
takes no requests and shows as UNAVAILABLE with that reason, until a reload
replaces it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edgebox.errors import EdgeboxError, InvalidArgument, NotFound, Unavailable
from edgebox.events import EventBus, ModelStateChanged
from edgebox.lifecycle.states import ModelState, VersionStatus
from edgebox.repository.result_publishing import result_publishing
from edgebox.scheduling.scheduler import Scheduler
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse

log = logging.getLogger(__name__)

UNKNOWN_MODEL = "Request for unknown model"
"""How Triton's answers for a model or version that cannot serve begin."""


@dataclass
class ServedModel:
    """A loaded version. Thread-safe: many requests enter and exit concurrently."""

    name: str
    version: int
    config: object
    signature: ModelSignature
    scheduler: Scheduler
    labels: dict[str, list[str]] = field(default_factory=dict)
    """Output name -> class labels, from ``label_filename`` (classification extension)."""
    notes: list[str] = field(default_factory=list)
    on_close: Callable[[], None] | None = None
    source: tuple = ()
    """What it was loaded from (config digest, folder fingerprint): unchanged
    source means a reload of this version can be skipped."""
    model_dir: Path | None = None
    """The model folder it was loaded from: the repository's, or the override
    folder a load request's files were written to (kept while this serves)."""

    def __post_init__(self) -> None:
        self.where = f"model '{self.name}' version {self.version}"
        self.publishing = result_publishing(self.config) if self.config is not None else None
        """Whether clients' results of this version go to MQTT (read once, not per request)."""
        self._inflight = 0
        self._retired = False
        self._idle = threading.Condition(threading.Lock())
        self.observer: Observer | None = None
        """Sees every request the dataplane runs on this version, its latency
        and outcome, while a rollout or its watch window needs them."""
        self.on_trial: Callable[[int, bool], None] | None = None
        """Told the requests in flight (and whether one just started) while the
        version is on trial, so a crash can be pinned on it (crash_marks.py)."""

    @property
    def inflight(self) -> int:
        return self._inflight

    def enter(self) -> bool:
        with self._idle:
            if self._retired:
                return False
            self._inflight += 1
            if self.on_trial is not None:
                self.on_trial(self._inflight, True)
            return True

    def exit(self) -> None:
        with self._idle:
            self._inflight -= 1
            if self.on_trial is not None:
                self.on_trial(self._inflight, False)
            if self._inflight == 0:
                self._idle.notify_all()

    @property
    def retired(self) -> bool:
        """Taking no new requests (``retire``)."""
        return self._retired

    def retire(self) -> None:
        """Take no new requests; those in flight finish normally."""
        with self._idle:
            self._retired = True

    def wait_drained(self, timeout_s: float | None = None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._inflight == 0, timeout_s)

    def close(self) -> None:
        self.scheduler.close()
        if self.on_close is not None:
            self.on_close()


Observer = Callable[[InferRequest, "InferResponse | None", float, "BaseException | None"], None]
"""(request, response or None, seconds, error or None), on the request's thread."""


class CanaryRoute:
    """Sends ``percent`` of a model's default-version requests to a canary,
    evenly spread (every 5th for 20 %), not at random, so a short run of
    traffic gets its share too. Used under the registry's lock."""

    def __init__(self, candidate: ServedModel, percent: float) -> None:
        self.candidate = candidate
        self._percent = percent
        self._credit = 0.0

    def take(self) -> bool:
        self._credit += self._percent
        if self._credit >= 100.0:
            self._credit -= 100.0
            return True
        return False


class ModelRegistry:
    def __init__(self, bus: EventBus | None = None) -> None:
        self._bus = bus
        self._lock = threading.Lock()
        self._served: dict[str, dict[int, ServedModel]] = {}
        self._default: dict[str, ServedModel] = {}
        self._canaries: dict[str, CanaryRoute] = {}
        self._status: dict[str, dict[int | None, VersionStatus]] = {}

    def acquire(self, name: str, version: str = "") -> ServedModel:
        """The version to run a request on, counted in flight until ``exit()``.

        ``version`` "" means the default: the highest READY version. Raises
        NotFound for an unknown model or version and for a model with no
        version serving, Unavailable for a named version that is known but
        not ready (with its reason), as Triton does.
        """
        return self._find(name, version, count=True)

    def get(self, name: str, version: str = "") -> ServedModel:
        """Like ``acquire`` without counting a request (metadata, config, a
        check before a request is read): a canary route is not taken either."""
        return self._find(name, version, count=False)

    def _find(self, name: str, version: str, count: bool) -> ServedModel:
        with self._lock:
            if version:
                number = _version_number(name, version)
                served = self._served.get(name, {}).get(number)
            else:
                number = None
                served = self._default.get(name)
                if count and self._canaries:
                    route = self._canaries.get(name)
                    if route is not None and route.take() and route.candidate.enter():
                        return route.candidate
            failure = served.scheduler.failure if served is not None else None
            if (
                served is not None
                and failure is None
                and (served.enter() if count else not served.retired)
            ):
                return served
            if failure is None:
                raise self._not_servable(name, number)
        self.set_status(name, served.version, ModelState.UNAVAILABLE, failure)
        raise Unavailable(failure)

    def publish(self, served: ServedModel) -> ServedModel | None:
        """Make a loaded version take traffic; returns the one it replaces."""
        with self._lock:
            versions = self._served.setdefault(served.name, {})
            previous = versions.get(served.version)
            versions[served.version] = served
            self._recompute_default(served.name)
        self.set_status(served.name, served.version, ModelState.READY, "; ".join(served.notes))
        return previous

    def route_canary(self, name: str, route: CanaryRoute | None) -> None:
        """Start (or with None, stop) sending a share of ``name``'s default
        requests to a canary that is not published."""
        with self._lock:
            if route is None:
                self._canaries.pop(name, None)
            else:
                self._canaries[name] = route

    def withdraw(self, name: str, versions: list[int]) -> list[ServedModel]:
        """Stop routing requests to these versions, all in one step, so a
        request never falls back to a version that is leaving too; the caller
        retires and closes what is returned."""
        withdrawn = []
        with self._lock:
            served_versions = self._served.get(name, {})
            for version in versions:
                served = served_versions.pop(version, None)
                if served is not None:
                    served.retire()
                    withdrawn.append(served)
            self._recompute_default(name)
        return withdrawn

    def served_versions(self, name: str) -> dict[int, ServedModel]:
        with self._lock:
            return dict(self._served.get(name, {}))

    def set_status(
        self, name: str, version: int | None, state: ModelState, reason: str = ""
    ) -> None:
        status = VersionStatus(state, reason)
        with self._lock:
            statuses = self._status.setdefault(name, {})
            if statuses.get(version) == status:
                return
            statuses[version] = status
        label = f"model '{name}'" + (f" version {version}" if version is not None else "")
        if state is ModelState.UNAVAILABLE and reason:
            log.warning("%s: %s: %s", label, state.value, reason)
        else:
            log.info("%s: %s%s", label, state.value, f" ({reason})" if reason else "")
        if self._bus is not None:
            self._bus.publish(ModelStateChanged(name, version, state.value, reason))

    def clear_status(self, name: str, version: int | None) -> None:
        with self._lock:
            self._status.get(name, {}).pop(version, None)

    def statuses(self, name: str) -> dict[int | None, VersionStatus]:
        with self._lock:
            failed = [
                (version, served.scheduler.failure)
                for version, served in self._served.get(name, {}).items()
                if served.scheduler.failure is not None
            ]
        for version, failure in failed:
            self.set_status(name, version, ModelState.UNAVAILABLE, failure)
        with self._lock:
            return dict(self._status.get(name, {}))

    def model_names(self) -> list[str]:
        with self._lock:
            return sorted(set(self._status) | set(self._served))

    def is_ready(self, name: str, version: str = "") -> bool:
        try:
            self.get(name, version)
        except EdgeboxError:
            return False
        return True

    def _recompute_default(self, name: str) -> None:
        versions = self._served.get(name)
        if versions:
            self._default[name] = versions[max(versions)]
        else:
            self._default.pop(name, None)

    def _not_servable(self, name: str, version: int | None) -> EdgeboxError:
        """Triton's answers, word for word up to edgebox's detail in brackets
        or after a colon: clients (tritonclient's examples among them) match
        on ``startswith("Request for unknown model")``. As in Triton, a model
        with no version serving is NotFound, a named version that is known
        but not ready is Unavailable."""
        prefix = f"{UNKNOWN_MODEL}: '{name}'"
        statuses = self._status.get(name)
        if not statuses and name not in self._served:
            return NotFound(f"{prefix} is not found")
        if version is not None:
            status = statuses.get(version) if statuses else None
            if status is None:
                return NotFound(f"{prefix} version {version} is not found")
            return Unavailable(
                f"{prefix} version {version} is not at ready state: {_describe(status)}"
            )
        problems = [(v, s) for v, s in (statuses or {}).items() if s.state is not ModelState.READY]
        if problems:
            problems.sort(key=lambda item: -1 if item[0] is None else item[0], reverse=True)
            version_label, status = problems[0]
            which = f"version {version_label}" if version_label is not None else "model"
            return NotFound(f"{prefix} has no available versions ({which} is {_describe(status)})")
        return NotFound(f"{prefix} has no available versions")


def _describe(status: VersionStatus) -> str:
    return f"{status.state.value}: {status.reason}" if status.reason else status.state.value


def _version_number(name: str, version: str) -> int:
    try:
        number = int(version)
    except ValueError:
        raise InvalidArgument(
            f"model '{name}': version '{version}' is not a version number"
        ) from None
    if number < 0:
        raise InvalidArgument(f"model '{name}': version '{version}' is not a version number")
    return number
