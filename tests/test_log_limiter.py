"""Log lines that could repeat once per frame (or per reconnect) are limited
per key, and the next line says how many it stands for."""

from __future__ import annotations

from edgebox.log_limiter import LogLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_log_limiter_lets_one_line_per_interval_and_counts_the_rest():
    clock = FakeClock()
    limiter = LogLimiter(10, clock)
    assert limiter.allow("failure") == 0
    assert [limiter.allow("failure") for _ in range(3)] == [None, None, None]
    assert limiter.allow("summary") == 0, "keys are limited separately"
    clock.now += 10
    assert limiter.allow("failure") == 3
