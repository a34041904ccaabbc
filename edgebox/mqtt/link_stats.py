"""What the log, the dashboard and Prometheus show about the MQTT link."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("edgebox.mqtt")


@dataclass(frozen=True)
class MqttStats:
    state: str
    """starting, connecting, connected, disconnected, refused or stopped."""
    broker: str
    spool_rows: int = 0
    spool_bytes: int = 0
    oldest_unsent_age_s: float | None = None
    sent: int = 0
    acknowledged: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    """Per kind since start: spool cap (result, telemetry, event, status),
    ``queue`` (the bus queue overflowed), ``rejected`` (the broker refused it)."""
    degraded: str | None = None
    """Why the spool keeps messages in memory only, or None."""

    def figures(self) -> tuple:
        """What a log line reports; a line is written only when these change."""
        return (self.state, self.sent, self.spool_rows, tuple(self.dropped.items()))

    def line(self) -> str:
        oldest = (
            f", oldest unsent {self.oldest_unsent_age_s:.0f} s"
            if self.oldest_unsent_age_s is not None
            else ""
        )
        memory = f"; memory only: {self.degraded}" if self.degraded else ""
        return (
            f"MQTT: {self.state} ({self.broker}); sent {self.sent}, acknowledged "
            f"{self.acknowledged}; spool {self.spool_rows} messages, "
            f"{self.spool_bytes / 1e6:.1f} MB{oldest}; dropped {self.dropped or 'none'}{memory}"
        )


class LinkFigures:
    """The MQTT thread's running counts, made into ``MqttStats`` at most
    every half second (others read ``stats`` at any time), and a log line
    every ``log_interval_s`` when the figures changed."""

    def __init__(self, broker: str, log_interval_s: float, clock: Callable[[], float]) -> None:
        self.stats = MqttStats("starting", broker)
        self._log_interval_s = log_interval_s
        self._clock = clock
        self._closed = {"sent": 0, "acknowledged": 0}
        """Of the sessions already closed."""
        self._dropped: dict[str, int] = {}
        self._last = float("-inf")
        self._last_log = clock()
        self._logged: tuple = ()

    def count_drops(self, drops: dict[str, int]) -> None:
        for kind, count in drops.items():
            self._dropped[kind] = self._dropped.get(kind, 0) + count

    def session_closed(self, sent: int, acknowledged: int, rejected: int) -> None:
        self._closed["sent"] += sent
        self._closed["acknowledged"] += acknowledged
        if rejected:
            self.count_drops({"rejected": rejected})

    def refresh(
        self,
        state: str,
        broker: str,
        spool,
        session,
        wall_now: float,
        force: bool = False,
    ) -> None:
        """``spool``: the spool's ``SpoolStats``, asked for only when due;
        ``session``: the open ``BrokerSession`` or None."""
        now = self._clock()
        if not force and now - self._last < 0.5 and state == self.stats.state:
            return
        self._last = now
        figures = spool()
        oldest = figures.oldest_created_at
        self.stats = MqttStats(
            state=state,
            broker=broker,
            spool_rows=figures.rows,
            spool_bytes=figures.bytes,
            oldest_unsent_age_s=None if oldest is None else max(0.0, wall_now - oldest),
            sent=self._closed["sent"] + (session.sent if session else 0),
            acknowledged=self._closed["acknowledged"] + (session.acknowledged if session else 0),
            dropped={**figures.dropped, **self._dropped},
            degraded=figures.degraded,
        )
        if now - self._last_log >= self._log_interval_s:
            self._last_log = now
            if self.stats.figures() != self._logged:
                self._logged = self.stats.figures()
                log.info("%s", self.stats.line())
