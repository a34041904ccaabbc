"""``stream_down``: a stream not running for ``stream_down_after_s`` raises;
running again (or stopped by the daemon) clears."""

from __future__ import annotations

from edgebox.alerts.rules.base import Inputs
from edgebox.alerts.rules.stream_down import StreamDownRule
from edgebox.events import StreamState, StreamStatus


def status(name: str, state: StreamState, reason: str = "") -> StreamStatus:
    return StreamStatus(
        name, "rtsp://cam", "lane", state, reason, None, 0, 0, 0, 0, 0, 0, 0.0, "", 0.0
    )


def test_a_stream_down_past_the_delay_raises_and_running_again_clears():
    rule = StreamDownRule(after_s=30)
    rule.observe(status("road", StreamState.RECONNECTING, "source ended"), 0.0)
    assert rule.findings(Inputs(), 29.0) == {}
    (finding,) = rule.findings(Inputs(), 45.0).values()
    assert (finding.severity, finding.message) == (
        "warn",
        "stream 'road' reconnecting for 45 s: source ended",
    )
    rule.observe(status("road", StreamState.RUNNING), 46.0)
    assert rule.findings(Inputs(), 100.0) == {}


def test_changing_between_down_states_keeps_the_first_time_down():
    rule = StreamDownRule(after_s=30)
    rule.observe(status("road", StreamState.STARTING), 0.0)
    rule.observe(status("road", StreamState.MODEL_ERROR, "model 'lane' is not ready"), 20.0)
    assert rule.findings(Inputs(), 31.0)["road"].message == (
        "stream 'road' model_error for 31 s: model 'lane' is not ready"
    )


def test_a_stream_the_daemon_stopped_is_no_alert():
    rule = StreamDownRule(after_s=0)
    rule.observe(status("road", StreamState.RECONNECTING), 0.0)
    rule.observe(status("road", StreamState.STOPPED), 1.0)
    assert rule.findings(Inputs(), 100.0) == {}
