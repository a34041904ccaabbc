"""``model_unavailable``: a version that fails to load raises; READY or an
unload clears; a version retired on purpose (UNLOADING, then UNAVAILABLE)
raises nothing."""

from __future__ import annotations

from edgebox.alerts.rules.base import MAX_SUBJECTS, Inputs
from edgebox.alerts.rules.model_unavailable import ModelUnavailableRule
from edgebox.events import ModelStateChanged


def feed(rule: ModelUnavailableRule, *events: ModelStateChanged) -> dict:
    for event in events:
        rule.observe(event, 0.0)
    return rule.findings(Inputs(), 0.0)


def test_a_failed_load_raises_critical_until_a_retry_is_ready():
    rule = ModelUnavailableRule()
    found = feed(
        rule,
        ModelStateChanged("lane", 3, "LOADING"),
        ModelStateChanged("lane", 3, "UNAVAILABLE", "model.onnx: truncated"),
    )
    assert {s: (f.severity, f.message) for s, f in found.items()} == {
        "lane:3": ("critical", "model 'lane' version 3 is UNAVAILABLE: model.onnx: truncated")
    }
    assert list(feed(rule, ModelStateChanged("lane", 3, "LOADING"))) == ["lane:3"]
    assert feed(rule, ModelStateChanged("lane", 3, "READY")) == {}


def test_a_config_that_cannot_be_read_raises_for_the_model():
    rule = ModelUnavailableRule()
    found = feed(rule, ModelStateChanged("broken", None, "UNAVAILABLE", "config.pbtxt:3:1: x"))
    assert found["broken"].message == "model 'broken' is UNAVAILABLE: config.pbtxt:3:1: x"


def test_a_version_unloaded_on_purpose_is_no_alert():
    rule = ModelUnavailableRule()
    assert (
        feed(
            rule,
            ModelStateChanged("lane", 2, "READY"),
            ModelStateChanged("lane", 2, "UNLOADING", "unloaded"),
            ModelStateChanged("lane", 2, "UNAVAILABLE", "unloaded"),
        )
        == {}
    )
    assert list(feed(rule, ModelStateChanged("lane", 2, "UNAVAILABLE", "load failed"))) == [
        "lane:2"
    ]


def test_unloading_a_failed_version_clears_it():
    rule = ModelUnavailableRule()
    feed(rule, ModelStateChanged("lane", 2, "UNAVAILABLE", "load failed"))
    assert feed(rule, ModelStateChanged("lane", 2, "UNLOADING", "unloaded")) == {}


def test_the_failed_models_remembered_are_bounded():
    rule = ModelUnavailableRule()
    events = [ModelStateChanged(f"m{i}", 1, "UNAVAILABLE", "x") for i in range(MAX_SUBJECTS + 5)]
    found = feed(rule, *events)
    assert len(found) == MAX_SUBJECTS
    assert "m0:1" not in found and f"m{MAX_SUBJECTS + 4}:1" in found


def test_a_status_the_registry_dropped_without_an_event_clears():
    statuses = {("broken", None), ("lane", 2)}
    rule = ModelUnavailableRule(lambda model, version: (model, version) in statuses)
    found = feed(
        rule,
        ModelStateChanged("broken", None, "UNAVAILABLE", "config.pbtxt:3:1: x"),
        ModelStateChanged("lane", 2, "UNAVAILABLE", "load failed"),
    )
    assert sorted(found) == ["broken", "lane:2"]
    statuses.discard(("broken", None))
    assert list(rule.findings(Inputs(), 1.0)) == ["lane:2"]
