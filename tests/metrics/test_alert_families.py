"""``edgebox_alerts_active{rule,severity}`` through the real collector and
exposition: every rule switched on has its series from the start, and a
raised alert counts until it clears."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from edgebox.alerts.evaluator import AlertEvaluator
from edgebox.alerts.rules.model_unavailable import ModelUnavailableRule
from edgebox.alerts.rules.throttling import ThrottlingRule
from edgebox.events import EventBus, ModelStateChanged, ThermalChanged
from edgebox.metrics.collector import MetricsCollector


def scrape(evaluator: AlertEvaluator) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(MetricsCollector(None, custom=None, alerts=evaluator))
    text = generate_latest(registry).decode()
    return {
        (sample.labels["rule"], sample.labels["severity"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "edgebox_alerts_active"
    }


def test_every_rule_has_a_zero_series_until_an_alert_is_raised_and_again_once_cleared():
    bus = EventBus()
    evaluator = AlertEvaluator(bus, [ThrottlingRule(), ModelUnavailableRule()], 1.0)
    zero = {
        (rule, severity): 0.0
        for rule in ("throttling", "model_unavailable")
        for severity in ("warn", "critical")
    }
    assert scrape(evaluator) == zero
    bus.publish(ThermalChanged("gpu", "critical", 97.0, 95.0))
    bus.publish(ThermalChanged("tj", "critical", 96.0, 95.0))
    bus.publish(ModelStateChanged("lane", 2, "UNAVAILABLE", "load failed"))
    evaluator.step()
    assert scrape(evaluator) == {
        **zero,
        ("throttling", "critical"): 2.0,
        ("model_unavailable", "critical"): 1.0,
    }
    bus.publish(ThermalChanged("gpu", "warn", 89.0, 95.0))
    bus.publish(ThermalChanged("tj", "warn", 89.0, 95.0))
    bus.publish(ModelStateChanged("lane", 2, "READY"))
    evaluator.step()
    assert scrape(evaluator) == zero
