"""Login attempts per address over a sliding minute."""

from __future__ import annotations

from edgebox.dashboard.login_limiter import LoginLimiter


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
    assert limiter.attempt("a") == 60.0 - 10.0
    assert limiter.attempt("b") is None
    clock.now = 60.0
    assert limiter.attempt("a") is None  # the first left the window
    assert limiter.attempt("a") is not None
