"""The gates a new version passes on live requests, and the figures they
read: answers compared, errors on each side, latencies on each side.

``Tally`` is filled from request threads and a shadow worker at once and
judged from the rollout thread; it keeps bounded windows only, so a rollout
that waits a day for traffic costs no more memory than one that is done in a
minute. ``judge`` is the one place the gates are written down: the reason it
gives is what the operator reads (``rollout: 0/50 answers agree (OUTPUT0 max
|diff| 32.0 > atol 1e-05)``).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import NamedTuple

import numpy as np

from edgebox.repository.rollout_policy import RolloutPolicy

LATENCY_WINDOW = 2000
"""Latencies kept per side: enough for a p95 over any ``samples`` up to it."""


class Verdict(NamedTuple):
    passed: bool
    reason: str


class Figures(NamedTuple):
    """What the dashboard, metrics and events show of a rollout in progress."""

    samples: int
    agreed: int
    candidate_errors: int
    serving_requests: int
    serving_errors: int
    dropped: int
    candidate_p95_ms: float | None
    serving_p95_ms: float | None
    last_disagreement: str
    first_error: str

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.samples if self.samples else None


class Tally:
    """Thread-safe counts of one rollout or watch window."""

    def __init__(self, window: int = LATENCY_WINDOW) -> None:
        self._lock = threading.Lock()
        self._candidate_ms: deque[float] = deque(maxlen=window)
        self._serving_ms: deque[float] = deque(maxlen=window)
        self._candidate_outcomes: deque[bool] = deque(maxlen=window)
        self.samples = 0
        self.agreed = 0
        self.candidate_errors = 0
        self.serving_requests = 0
        self.serving_errors = 0
        self.dropped = 0
        self.last_disagreement = ""
        self.first_error = ""

    def serving(self, latency_s: float | None, failed: bool) -> None:
        with self._lock:
            self.serving_requests += 1
            if failed:
                self.serving_errors += 1
            elif latency_s is not None:
                self._serving_ms.append(latency_s * 1000.0)

    def candidate(self, latency_s: float | None, error: str = "") -> None:
        """A request the new version answered for real (canary, watch) or as a
        shadow; ``error`` when it failed."""
        with self._lock:
            self.samples += 1
            self._candidate_outcomes.append(not error)
            if error:
                self.candidate_errors += 1
                self.first_error = self.first_error or error
            elif latency_s is not None:
                self._candidate_ms.append(latency_s * 1000.0)

    def compared(self, latency_s: float, agree: bool, detail: str) -> None:
        """A shadow answer and its comparison, counted in one step so that
        no judge sees the answer without its verdict."""
        with self._lock:
            self.samples += 1
            self._candidate_outcomes.append(True)
            self._candidate_ms.append(latency_s * 1000.0)
            if agree:
                self.agreed += 1
            else:
                self.last_disagreement = detail

    def drop(self) -> None:
        with self._lock:
            self.dropped += 1

    def recent_errors(self, count: int) -> tuple[int, int]:
        """Failures among the new version's last ``count`` answers, and how
        many answers that window holds."""
        with self._lock:
            recent = list(self._candidate_outcomes)[-count:]
        return recent.count(False), len(recent)

    def figures(self) -> Figures:
        with self._lock:
            return Figures(
                self.samples,
                self.agreed,
                self.candidate_errors,
                self.serving_requests,
                self.serving_errors,
                self.dropped,
                _p95(self._candidate_ms),
                _p95(self._serving_ms),
                self.last_disagreement,
                self.first_error,
            )


def _p95(values: deque[float]) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.fromiter(values, dtype=np.float64), 95))


def judge(
    figures: Figures,
    policy: RolloutPolicy,
    compared: bool,
    serving_error_rate: float | None = None,
    serving_p95_ms: float | None = None,
) -> Verdict | None:
    """Passed, failed (with which gate and by how much), or None while more
    samples are needed. A gate that can no longer be met fails at once: a
    canary that already failed more often than allowed is not left to answer
    the rest of its samples.

    ``compared``: answers are paired (shadow); a canary is judged on errors
    and latency only. ``serving_error_rate`` and ``serving_p95_ms`` stand in
    for the serving side's own figures when it is not measured alongside
    (the watch window uses those of the rollout)."""
    wanted = policy.samples
    base_rate = serving_error_rate
    if base_rate is None:
        base_rate = (
            figures.serving_errors / figures.serving_requests if figures.serving_requests else 0.0
        )
    allowed_errors = math.floor((base_rate + policy.max_error_rate) * wanted + 1e-9)
    if figures.candidate_errors > allowed_errors:
        return Verdict(False, _errors_reason(figures, base_rate, policy))
    if compared:
        allowed_disagreements = math.floor((1.0 - policy.min_agreement) * wanted + 1e-9)
        disagreements = figures.samples - figures.candidate_errors - figures.agreed
        if disagreements > allowed_disagreements:
            return Verdict(False, _agreement_reason(figures, policy))
    if figures.samples < wanted:
        return None
    serving_p95 = serving_p95_ms if serving_p95_ms is not None else figures.serving_p95_ms
    candidate_p95 = figures.candidate_p95_ms
    if serving_p95 is not None and candidate_p95 is not None:
        limit = policy.max_latency_ratio * serving_p95 + policy.latency_allowance_ms
        if candidate_p95 > limit:
            return Verdict(
                False,
                f"rollout: p95 latency {candidate_p95:.2f} ms > {policy.max_latency_ratio:g} x "
                f"{serving_p95:.2f} ms + {policy.latency_allowance_ms:g} ms of the serving version",
            )
    return Verdict(True, _passed_reason(figures, compared, serving_p95))


def _errors_reason(figures: Figures, base_rate: float, policy: RolloutPolicy) -> str:
    return (
        f"rollout: {figures.candidate_errors}/{figures.samples} requests failed on the new "
        f"version (the serving one fails {base_rate:.0%}, max_error_rate "
        f"{policy.max_error_rate:g}): {figures.first_error}"
    )


def _agreement_reason(figures: Figures, policy: RolloutPolicy) -> str:
    answered = figures.samples - figures.candidate_errors
    return (
        f"rollout: {figures.agreed}/{answered} answers agree "
        f"({figures.last_disagreement}; min_agreement {policy.min_agreement:g})"
    )


def _passed_reason(figures: Figures, compared: bool, serving_p95: float | None) -> str:
    parts = []
    if compared:
        parts.append(f"{figures.agreed}/{figures.samples} answers agree")
    else:
        parts.append(f"{figures.samples - figures.candidate_errors}/{figures.samples} answered")
    if figures.candidate_p95_ms is not None and serving_p95 is not None:
        parts.append(f"p95 {figures.candidate_p95_ms:.2f} ms vs {serving_p95:.2f} ms")
    return ", ".join(parts)
