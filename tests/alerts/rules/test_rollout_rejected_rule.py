"""``rollout_rejected``: a rejected or rolled-back rollout raises until the
model's next rollout starts, or the configured time has passed."""

from __future__ import annotations

from edgebox.alerts.rules.base import Inputs
from edgebox.alerts.rules.rollout_rejected import RolloutRejectedRule
from edgebox.events import RolloutRejected, RolloutRolledBack, RolloutStarted

FIGURES = dict(
    serving_version=1,
    policy="shadow",
    samples=12,
    samples_wanted=50,
    agreement=0.75,
    candidate_p95_ms=None,
    serving_p95_ms=None,
    errors=0,
    dropped=0,
)


def test_a_rejection_raises_until_the_next_rollout_starts():
    rule = RolloutRejectedRule(clear_after_s=0)
    rule.observe(RolloutRejected("lane", 2, reason="9/12 answers agree", **FIGURES), 0.0)
    (finding,) = rule.findings(Inputs(), 1e6).values()
    assert (finding.severity, finding.message) == (
        "warn",
        "model 'lane' version 2 rejected: 9/12 answers agree",
    )
    rule.observe(RolloutStarted("lane", 3, **FIGURES), 1e6)
    assert rule.findings(Inputs(), 1e6) == {}


def test_a_rejection_clears_after_the_configured_time():
    rule = RolloutRejectedRule(clear_after_s=3600)
    rule.observe(RolloutRolledBack("lane", 2, reason="3 failures", **FIGURES), 10.0)
    assert rule.findings(Inputs(), 3609.0)["lane"].message == (
        "model 'lane' version 2 rolled back: 3 failures"
    )
    assert rule.findings(Inputs(), 3610.0) == {}


def test_another_models_rollout_does_not_clear_it():
    rule = RolloutRejectedRule(clear_after_s=0)
    rule.observe(RolloutRejected("lane", 2, **FIGURES), 0.0)
    rule.observe(RolloutStarted("other", 5, **FIGURES), 1.0)
    assert list(rule.findings(Inputs(), 2.0)) == ["lane"]
