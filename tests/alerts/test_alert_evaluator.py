"""The evaluator thread: the bus's events and the latest telemetry go to the
rules, and each raise and clear is published on the bus as an AlertEvent
(edgebox/alerts/evaluator.py). Driven step by step with a fake clock; one
test runs the thread itself."""

from __future__ import annotations

from daemon_process import wait_for
from edgebox.alerts.evaluator import AlertEvaluator
from edgebox.alerts.rule_set import build_rules
from edgebox.alerts.rules.model_unavailable import ModelUnavailableRule
from edgebox.alerts.rules.temperature import TemperatureRule
from edgebox.alerts.rules.throttling import ThrottlingRule
from edgebox.alerts.settings import AlertSettings
from edgebox.events import AlertEvent, EventBus, ModelStateChanged, ThermalChanged
from edgebox.telemetry.sample import TelemetrySample
from fakes.fake_clock import FakeClock


class FakeTelemetry:
    """The sampler's ``latest()``, set by the test."""

    def __init__(self) -> None:
        self.sample: TelemetrySample | None = None

    def heat(self, **zones: float) -> None:
        self.sample = TelemetrySample(
            timestamp=0.0, source="sysfs", cpu_pct=None, temperatures_c=zones
        )

    def latest(self) -> TelemetrySample | None:
        return self.sample


class RaisingRule:
    """A rule whose judgement always fails."""

    name = "broken"
    EVENTS = ()

    def observe(self, event, now) -> None:
        pass

    def findings(self, inputs, now):
        raise RuntimeError("bug in a rule")


def published(subscription) -> list[AlertEvent]:
    return [e for e in subscription.get_batch(100, 0) if isinstance(e, AlertEvent)]


def test_a_hot_zone_is_published_raised_then_cleared_on_the_bus():
    bus = EventBus()
    listener = bus.subscribe(AlertEvent)
    telemetry = FakeTelemetry()
    clock = FakeClock()
    evaluator = AlertEvaluator(
        bus,
        [TemperatureRule(80, 90, 3, 0)],
        1.0,
        telemetry=telemetry,
        clock=clock,
        wall_clock=clock.wall,
    )
    telemetry.heat(gpu=50)
    assert evaluator.step() == [] and published(listener) == []
    telemetry.heat(gpu=85)
    raised_at = clock.wall()
    evaluator.step()
    (raised,) = published(listener)
    assert (raised.state, raised.rule, raised.subject, raised.severity, raised.since) == (
        "raised",
        "temperature",
        "gpu",
        "warn",
        raised_at,
    )
    assert [a.subject for a in evaluator.snapshot()] == ["gpu"]
    clock.advance(2)
    telemetry.heat(gpu=78)
    assert evaluator.step() == []
    clock.advance(2)
    telemetry.heat(gpu=76)
    evaluator.step()
    (cleared,) = published(listener)
    assert (cleared.state, cleared.since, cleared.timestamp) == ("cleared", raised_at, clock.wall())
    assert evaluator.snapshot() == []


def test_events_published_before_a_step_are_observed_at_it():
    bus = EventBus()
    listener = bus.subscribe(AlertEvent)
    evaluator = AlertEvaluator(bus, [ThrottlingRule(), ModelUnavailableRule()], 1.0)
    bus.publish(ThermalChanged("tj", "critical", 96.0, 95.0))
    bus.publish(ModelStateChanged("lane", 2, "UNAVAILABLE", "load failed"))
    evaluator.step()
    assert sorted((e.rule, e.subject) for e in published(listener)) == [
        ("model_unavailable", "lane:2"),
        ("throttling", "tj"),
    ]


def test_a_failing_rule_is_skipped_and_the_others_still_judge():
    bus = EventBus()
    telemetry = FakeTelemetry()
    telemetry.heat(gpu=95)
    evaluator = AlertEvaluator(
        bus, [RaisingRule(), TemperatureRule(80, 90, 3, 0)], 1.0, telemetry=telemetry
    )
    assert [(e.rule, e.severity) for e in evaluator.step()] == [("temperature", "critical")]


def test_the_rules_the_section_switches_off_are_not_built():
    every = build_rules(AlertSettings(), spool_capacity_bytes=1024)
    assert [rule.name for rule in every] == [
        "temperature",
        "throttling",
        "memory",
        "stream_down",
        "model_unavailable",
        "rollout_rejected",
        "mqtt_offline",
        "spool",
    ]
    fewer = build_rules(AlertSettings(temperature=False, memory=False), spool_capacity_bytes=None)
    assert [rule.name for rule in fewer] == [
        "throttling",
        "stream_down",
        "model_unavailable",
        "rollout_rejected",
    ]


def test_no_rule_wanting_events_means_no_subscription():
    bus = EventBus()
    AlertEvaluator(bus, [TemperatureRule(80, 90, 3, 0)], 1.0)
    assert bus.subscriptions == ()


def test_the_thread_judges_at_its_pace_and_leaves_the_bus_when_stopped():
    bus = EventBus()
    listener = bus.subscribe(AlertEvent)
    evaluator = AlertEvaluator(bus, [ThrottlingRule()], 0.2)
    evaluator.start()
    try:
        bus.publish(ThermalChanged("gpu", "critical", 97.0, 95.0))
        event = wait_for(lambda: listener.get(0), 10, what="the raised alert")
        assert (event.state, event.subject) == ("raised", "gpu")
    finally:
        assert evaluator.stop(5)
    assert bus.subscriptions == (listener,)
