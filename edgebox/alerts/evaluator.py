"""The alerts thread: every ``alerts.interval_s`` it hands the rules the
events published since the last judgement and the latest telemetry and MQTT
figures, updates the active set, and publishes each raise and clear as an
``AlertEvent`` on the bus (so MQTT ``events`` and the events page carry it).

It reads what other threads already measured and never blocks them: its bus
subscription is bounded (oldest dropped when it falls behind), and a rule
that raises is logged and skipped for that judgement, never the thread lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from edgebox.alerts.active import ActiveAlerts
from edgebox.alerts.alert import Alert
from edgebox.alerts.rules.base import Inputs, Rule
from edgebox.events import AlertEvent, EventBus
from edgebox.log_limiter import LogLimiter
from edgebox.mqtt.link_stats import MqttStats
from edgebox.telemetry.sample import TelemetrySample

log = logging.getLogger("edgebox.alerts")

T = TypeVar("T")

MAX_QUEUED_EVENTS = 2000
"""The subscription's bound: a burst past it (a repository of hundreds of
models reloading) loses its oldest events, counted by the bus."""


class LatestSample(Protocol):
    def latest(self) -> TelemetrySample | None: ...


class MqttStatsSource(Protocol):
    def stats(self) -> MqttStats: ...


class AlertEvaluator:
    """Subscribes at construction, so events published before ``start`` are
    judged at the first step. ``step`` is the thread's one judgement, public
    for tests that drive it with a fake clock."""

    def __init__(
        self,
        bus: EventBus,
        rules: Sequence[Rule],
        interval_s: float,
        telemetry: LatestSample | None = None,
        mqtt: MqttStatsSource | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._bus = bus
        self._rules = list(rules)
        self._interval_s = interval_s
        self._telemetry = telemetry
        self._mqtt = mqtt
        self._clock = clock
        self._wall_clock = wall_clock
        self.active = ActiveAlerts()
        kinds = tuple(dict.fromkeys(kind for rule in self._rules for kind in rule.EVENTS))
        # No kinds would subscribe to every event: then no subscription at all.
        self._subscription = bus.subscribe(*kinds, max_events=MAX_QUEUED_EVENTS) if kinds else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._log_limiter = LogLimiter(60.0)

    @property
    def rules(self) -> tuple[str, ...]:
        """The names of the rules switched on."""
        return tuple(rule.name for rule in self._rules)

    def snapshot(self) -> list[Alert]:
        return self.active.snapshot()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="alerts", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float) -> bool:
        """Ends the thread after its judgement in progress and leaves the bus;
        False if it is still running after ``timeout_s``."""
        self._stop.set()
        if self._subscription is not None:
            self._subscription.close()
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def step(self) -> list[AlertEvent]:
        """Observe the queued events, judge every rule, publish the changes."""
        now = self._clock()
        if self._subscription is not None:
            while batch := self._subscription.get_batch(MAX_QUEUED_EVENTS, 0):
                for event in batch:
                    for rule in self._rules:
                        if isinstance(event, rule.EVENTS):
                            self._guarded(rule, "observing an event", rule.observe, event, now)
        inputs = Inputs(
            sample=self._telemetry.latest() if self._telemetry is not None else None,
            mqtt=self._mqtt.stats() if self._mqtt is not None else None,
        )
        wall_now = self._wall_clock()
        published = []
        for rule in self._rules:
            findings = self._guarded(rule, "judging", rule.findings, inputs, now)
            if findings is None:
                continue
            published += self.active.apply(rule.name, findings, wall_now)
        for event in published:
            self._bus.publish(event)
        return published

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self._interval_s)

    def _guarded(self, rule: Rule, doing: str, call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(*args)
        except Exception as exc:
            held = self._log_limiter.allow(rule.name)
            if held is not None:
                log.error(
                    "alerts: rule '%s' failed %s; skipped: %s: %s",
                    rule.name,
                    doing,
                    type(exc).__name__,
                    exc,
                    exc_info=exc,
                )
            return None
