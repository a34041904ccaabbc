"""One rollout in progress: the candidate, the version serving meanwhile,
their figures, and what the status resource and the watch window read of
them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from edgebox.lifecycle.registry import ServedModel
from edgebox.lifecycle.rollout.gates import Figures, Tally, Verdict, judge
from edgebox.lifecycle.rollout.shadow import ShadowRunner
from edgebox.repository.rollout_policy import RolloutPolicy


@dataclass
class Rollout:
    """One candidate proving itself against the serving version."""

    name: str
    candidate: ServedModel
    serving: ServedModel
    policy: RolloutPolicy
    digest: str
    started: float = field(default_factory=time.time)
    tally: Tally = field(default_factory=Tally)
    shadow: ShadowRunner | None = None
    stage: str = ""
    """The policy (``shadow``/``canary``) until promoted, then ``watching``."""
    watch: Tally | None = None
    watch_until: float = 0.0
    decided: Figures | None = None
    """The rollout's figures when it was promoted (what the watch compares to)."""
    last_progress: float = 0.0

    @property
    def key(self) -> tuple[int, tuple]:
        return self.candidate.version, self.candidate.source


@dataclass(frozen=True)
class Outcome:
    """How a model's last rollout ended, for the status resource."""

    version: int
    result: str
    reason: str
    at: float


def watch_failure(rollout: Rollout) -> str | None:
    """Why the promoted version must go, judged on its last ``samples``
    answers against what the serving version showed during the rollout."""
    assert rollout.watch is not None and rollout.decided is not None
    policy = rollout.policy
    decided = rollout.decided
    base_rate = (
        decided.serving_errors / decided.serving_requests if decided.serving_requests else 0.0
    )
    errors, answered = rollout.watch.recent_errors(policy.samples)
    allowed = int((base_rate + policy.max_error_rate) * policy.samples + 1e-9)
    if errors > allowed:
        return (
            f"{errors} of its last {answered} requests failed after promotion "
            f"(allowed {allowed}): {rollout.watch.figures().first_error}"
        )
    figures = rollout.watch.figures()
    if answered >= policy.samples and decided.serving_p95_ms is not None:
        verdict: Verdict | None = judge(
            figures._replace(candidate_errors=errors, samples=answered),
            policy,
            compared=False,
            serving_error_rate=base_rate,
            serving_p95_ms=decided.serving_p95_ms,
        )
        if verdict is not None and not verdict.passed:
            return verdict.reason.removeprefix("rollout: ") + " after promotion"
    return None


def figures_document(rollout: Rollout) -> dict:
    figures = rollout.tally.figures() if rollout.stage != "watching" else rollout.decided
    document = {
        "stage": rollout.stage,
        "policy": rollout.policy.policy,
        "version": rollout.candidate.version,
        "serving_version": rollout.serving.version,
        "started": rollout.started,
        "samples": figures.samples if figures else 0,
        "samples_wanted": rollout.policy.samples,
        "agreed": figures.agreed if figures else 0,
        "agreement": figures.agreement if figures and rollout.policy.policy == "shadow" else None,
        "errors": figures.candidate_errors if figures else 0,
        "dropped": figures.dropped if figures else 0,
        "candidate_p95_ms": figures.candidate_p95_ms if figures else None,
        "serving_p95_ms": figures.serving_p95_ms if figures else None,
        "last_disagreement": figures.last_disagreement if figures else "",
        "gates": rollout.policy.describe(),
    }
    if rollout.stage == "watching" and rollout.watch is not None:
        watch = rollout.watch.figures()
        document["watch"] = {
            "until": rollout.watch_until,
            "requests": watch.samples,
            "errors": watch.candidate_errors,
            "p95_ms": watch.candidate_p95_ms,
        }
    return document
