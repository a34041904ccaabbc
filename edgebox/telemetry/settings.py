"""The ``telemetry:`` section of the daemon's settings (docs/configuration.md).

Telemetry is on by default, unlike MQTT: the section may be left out, and
each field may be set alone (``EDGEBOX_TELEMETRY_SOURCE``,
``--telemetry-interval-s``). Parsed by ``edgebox/settings/`` like every
section; ``problems()`` names what is wrong field by field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

from edgebox.telemetry.source import SOURCES

MAX_HISTORY_SAMPLES = 100_000
"""Most samples the ring may hold (``history_s / interval_s``): a day at 1 Hz
is 86400, about 50 MB."""


@dataclasses.dataclass(frozen=True)
class TelemetrySettings:
    """How the module's GPU, CPU, memory, temperatures and power are sampled
    (edgebox/telemetry/)."""

    source: str = "auto"
    """``auto`` (jetson-stats when its service runs, else sysfs on a Jetson,
    else psutil), ``jtop``, ``sysfs`` or ``psutil``. A named source that
    cannot start is logged and the next in that order is used."""
    sysfs_root: Path = Path("/")
    """Where the sysfs source finds ``sys/``, ``proc/`` and ``etc/``; only
    tests and containers with the host's trees mounted elsewhere change it."""
    interval_s: float = 1.0
    """Seconds between samples (0.1..60)."""
    history_s: float = 900.0
    """Seconds of samples kept in memory for the dashboard's charts."""
    thermal_warn_c: float = 85.0
    """A zone at or above this many °C is ``warn``: logged, and an
    ``edgebox.thermal`` event on the bus (and MQTT ``events``)."""
    thermal_critical_c: float = 95.0
    """A zone at or above this many °C is ``critical`` (Orin modules throttle
    near 99 °C and shut down near 105 °C)."""
    hysteresis_c: float = 5.0
    """How far below a threshold a zone must fall before it counts as back
    under it, so a reading hovering at a threshold is reported once."""
    mqtt_interval_s: float = 10.0
    """Seconds between telemetry messages on MQTT ``{prefix}/{device}/telemetry``
    when MQTT is on; 0: none."""

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.source not in SOURCES:
            yield "source", f"expected one of {', '.join(SOURCES)}, got {self.source!r}"
        if not 0.1 <= self.interval_s <= 60:
            yield "interval_s", f"expected 0.1..60 seconds, got {self.interval_s}"
        elif not self.interval_s <= self.history_s <= self.interval_s * MAX_HISTORY_SAMPLES:
            yield (
                "history_s",
                f"expected interval_s ({self.interval_s}) .. {MAX_HISTORY_SAMPLES} samples "
                f"({self.interval_s * MAX_HISTORY_SAMPLES:g}) seconds, got {self.history_s}",
            )
        if self.thermal_critical_c <= self.thermal_warn_c:
            yield (
                "thermal_critical_c",
                f"expected more than thermal_warn_c ({self.thermal_warn_c}), "
                f"got {self.thermal_critical_c}",
            )
        if not 0 <= self.hysteresis_c <= 50:
            yield "hysteresis_c", f"expected 0..50 °C, got {self.hysteresis_c}"
        if self.mqtt_interval_s < 0:
            yield "mqtt_interval_s", f"expected a number >= 0 (0: none), got {self.mqtt_interval_s}"
