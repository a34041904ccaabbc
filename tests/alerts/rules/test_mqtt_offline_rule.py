"""``mqtt_offline``: the link not connected for ``mqtt_offline_after_s``
raises (a refusal is critical); connected again clears."""

from __future__ import annotations

from edgebox.alerts.rules.base import Inputs
from edgebox.alerts.rules.mqtt_offline import MqttOfflineRule
from edgebox.events import MqttLinkChanged
from edgebox.mqtt.link_stats import MqttStats

BROKER = "127.0.0.1:1883"


def link(state: str) -> Inputs:
    return Inputs(mqtt=MqttStats(state, BROKER))


def test_a_link_down_past_the_delay_raises_and_connected_clears():
    rule = MqttOfflineRule(after_s=60)
    assert rule.findings(link("connected"), 0.0) == {}
    rule.observe(MqttLinkChanged("disconnected", BROKER, "connection refused"), 1.0)
    assert rule.findings(link("disconnected"), 10.0) == {}
    assert rule.findings(link("connecting"), 69.0) == {}
    (finding,) = rule.findings(link("connecting"), 75.0).values()
    assert (finding.severity, finding.message) == (
        "warn",
        "MQTT link to 127.0.0.1:1883 disconnected for 65 s: connection refused",
    )
    assert rule.findings(link("connected"), 76.0) == {}
    assert rule.findings(link("disconnected"), 77.0) == {}


def test_a_link_that_never_came_up_counts_from_the_first_judgement():
    rule = MqttOfflineRule(after_s=60)
    assert rule.findings(link("starting"), 0.0) == {}
    assert list(rule.findings(link("connecting"), 60.0)) == ["mqtt link"]


def test_a_refused_login_is_critical():
    rule = MqttOfflineRule(after_s=0)
    rule.observe(MqttLinkChanged("refused", BROKER, "Bad user name or password"), 0.0)
    (finding,) = rule.findings(link("refused"), 0.0).values()
    assert finding.severity == "critical"


def test_a_stopping_daemon_or_no_mqtt_is_no_alert():
    rule = MqttOfflineRule(after_s=0)
    assert rule.findings(link("stopped"), 0.0) == {}
    assert rule.findings(Inputs(), 0.0) == {}
