"""The gates: when a rollout passes, fails (and says by how much), or needs
more samples; a gate that can no longer be met fails at once."""

from __future__ import annotations

from edgebox.lifecycle.rollout.gates import Tally, judge
from edgebox.repository.rollout_policy import RolloutPolicy

POLICY = RolloutPolicy(samples=20, min_agreement=0.9)


def _shadow(agreeing: int, disagreeing: int = 0, latency_s: float = 0.001) -> Tally:
    tally = Tally()
    for index in range(agreeing + disagreeing):
        tally.serving(0.001, failed=False)
        tally.compared(latency_s, index < agreeing, "OUTPUT0 max |diff| 1.0 > atol 1e-05")
    return tally


def test_a_shadow_needs_all_its_samples_before_passing():
    assert judge(_shadow(19).figures(), POLICY, compared=True) is None
    verdict = judge(_shadow(20).figures(), POLICY, compared=True)
    assert verdict.passed and verdict.reason.startswith("20/20 answers agree")


def test_disagreement_within_min_agreement_passes_and_beyond_fails_early():
    assert judge(_shadow(18, 2).figures(), POLICY, compared=True).passed
    verdict = judge(_shadow(1, 3).figures(), POLICY, compared=True)
    assert verdict == (
        False,
        "rollout: 1/4 answers agree (OUTPUT0 max |diff| 1.0 > atol 1e-05; min_agreement 0.9)",
    )


def test_a_slower_version_fails_the_latency_gate_by_its_figures():
    verdict = judge(_shadow(20, latency_s=0.010).figures(), POLICY, compared=True)
    assert verdict == (
        False,
        "rollout: p95 latency 10.00 ms > 1.5 x 1.00 ms + 1 ms of the serving version",
    )
    assert judge(_shadow(20, latency_s=0.0024).figures(), POLICY, compared=True).passed


def test_a_canary_may_fail_as_often_as_the_serving_version_plus_the_allowance():
    tally = Tally()
    for index in range(100):
        tally.serving(0.001, failed=index % 10 == 0)
    for index in range(20):
        tally.candidate(0.001, "boom" if index < 2 else "")
    assert judge(tally.figures(), POLICY, compared=False).passed
    tally.candidate(None, "boom again")
    verdict = judge(tally.figures(), POLICY, compared=False)
    assert not verdict.passed
    assert verdict.reason == (
        "rollout: 3/21 requests failed on the new version (the serving one fails 10%, "
        "max_error_rate 0): boom"
    )
