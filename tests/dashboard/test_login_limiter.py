"""Login attempts per address over a sliding minute, and which refusals are
worth a log line."""

from __future__ import annotations

from edgebox.dashboard.login_limiter import LoginLimiter, Refusal


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_attempts_past_the_limit_wait_until_the_oldest_leaves_the_minute():
    clock = Clock()
    limiter = LoginLimiter(2, clock)
    assert limiter.attempt("a") is None
    clock.now = 10.0
    assert limiter.attempt("a") is None
    refused = limiter.attempt("a")
    assert refused is not None and refused.wait_s == 60.0 - 10.0
    assert limiter.attempt("b") is None
    clock.now = 60.0
    assert limiter.attempt("a") is None  # the first left the window
    assert limiter.attempt("a") is not None


def test_a_clients_refusals_are_reported_once_a_minute_with_the_count_held_back():
    clock = Clock()
    limiter = LoginLimiter(1, clock)
    assert limiter.attempt("a") is None
    clock.now = 1.0
    assert limiter.attempt("a") == Refusal(59.0, report=True, held=0)
    assert limiter.attempt("b") is None  # another address has its own
    for held in range(1, 4):
        clock.now += 1.0
        assert limiter.attempt("a") == Refusal(59.0 - held, report=False, held=held)
    clock.now = 61.0  # the first attempt left the window: this one goes ahead
    assert limiter.attempt("a") is None
    clock.now = 62.0
    assert limiter.attempt("a") == Refusal(59.0, report=True, held=3)
