"""What the log, the dashboard and Prometheus show about the MQTT link."""

from __future__ import annotations

from dataclasses import dataclass, field


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
