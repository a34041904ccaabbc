"""The ``alerts:`` section of the daemon's settings (docs/configuration.md).

Alerts are on by default with every rule on: the section may be left out,
and each field may be set alone (``EDGEBOX_ALERTS_MEMORY_WARN_PCT``,
``--alerts-stream-down-after-s``). Each rule has a switch of its own name
(``temperature: false``). Parsed by ``edgebox/settings/`` like every
section; ``problems()`` names what is wrong field by field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

ZONE_MAX_FIELD = "temperature_zone_max_c"


@dataclasses.dataclass(frozen=True)
class AlertSettings:
    """Which conditions raise an alert on the dashboard's banner, MQTT
    ``events`` and ``edgebox_alerts_active`` (edgebox/alerts/), and when
    each clears."""

    enabled: bool = True
    """Judge alerts at all; false: no evaluator thread, no banner."""
    interval_s: float = 2.0
    """Seconds between two judgements (0.2..60): the evaluator's own pace,
    off the inference path; durations below are measured at this grain."""
    temperature: bool = True
    """Alert when a thermal zone runs hot."""
    temperature_warn_c: float = 80.0
    """A zone at or above this many °C raises a ``warn`` alert."""
    temperature_critical_c: float = 90.0
    """A zone at or above this many °C raises it to ``critical``."""
    temperature_zone_max_c: tuple[str, ...] = dataclasses.field(
        default=(), metadata={"metavar": "ZONE=C"}
    )
    """Per-zone limits, ``ZONE=C`` each (YAML: a mapping ``{gpu: 85}``): the
    zone is critical at C and warns as far below it as the defaults do
    (``temperature_critical_c - temperature_warn_c``)."""
    temperature_clear_c: float = 3.0
    """How far below a threshold a zone must cool before its alert drops a
    level (critical to warn, warn to cleared), so a zone hovering at a
    threshold does not flap."""
    temperature_for_s: float = 0.0
    """Seconds a zone must stay past a threshold before the alert is raised."""
    throttling: bool = True
    """Alert (``critical``) while the telemetry's thermal guard holds a zone
    at its critical level (``telemetry.thermal_critical_c``, where Orin
    modules start to throttle); it clears when the guard does
    (``telemetry.hysteresis_c`` lower)."""
    memory: bool = True
    """Alert when RAM runs short (on a Jetson the GPU shares it)."""
    memory_warn_pct: float = 90.0
    """Used memory, percent of the total, that raises a ``warn`` alert."""
    memory_critical_pct: float = 97.0
    """Used memory, percent, that raises it to ``critical``."""
    memory_clear_pct: float = 5.0
    """Percentage points below a threshold that memory must fall to drop a level."""
    memory_for_s: float = 30.0
    """Seconds memory must stay past a threshold before the alert is raised:
    a load's brief peak is no alert."""
    stream_down: bool = True
    """Alert when a stream is not running (reconnecting, model error, still
    starting); a stream the daemon stopped is no alert."""
    stream_down_after_s: float = 30.0
    """Seconds a stream must stay down before the alert is raised."""
    model_unavailable: bool = True
    """Alert (``critical``) when a model version fails to load or to keep
    serving (state UNAVAILABLE); unloading on request is no alert. Clears
    when the version is READY, unloaded or removed."""
    rollout_rejected: bool = True
    """Alert (``warn``) when a new version's rollout is rejected or rolled
    back; clears when that model's next rollout starts or after
    ``rollout_rejected_clear_after_s``."""
    rollout_rejected_clear_after_s: float = 3600.0
    """Seconds a rejection stays on the banner; 0: until the next rollout."""
    mqtt_offline: bool = True
    """Alert when MQTT is configured and its link is not connected (a
    refused login or a device id conflict is ``critical``)."""
    mqtt_offline_after_s: float = 60.0
    """Seconds the link must stay down before the alert is raised."""
    spool: bool = True
    """Alert when the MQTT spool fills (its messages wait for the broker)."""
    spool_warn_pct: float = 80.0
    """Spool use, percent of ``mqtt.spool_max_mb``, that raises a ``warn``
    alert; at 100 % the oldest results are dropped."""
    spool_clear_pct: float = 10.0
    """Percentage points below ``spool_warn_pct`` the spool must drain to clear."""

    @property
    def zone_max_c(self) -> dict[str, float]:
        """``temperature_zone_max_c`` as zone -> °C."""
        return dict(_zone_limit(item) for item in self.temperature_zone_max_c)

    @classmethod
    def parse_field(cls, name: str, raw: Any, coerce: Callable[[Any], Any]) -> Any:
        """``temperature_zone_max_c`` comes as a YAML mapping, a list of
        ``ZONE=C`` or text ``gpu=85,tj=95``; kept as ``ZONE=C`` items."""
        if name != ZONE_MAX_FIELD:
            return coerce(raw)
        if isinstance(raw, dict):
            raw = [f"{zone}={limit}" for zone, limit in raw.items()]
        items = coerce(raw)
        limits = [_zone_limit(item) for item in items]
        zones = [zone for zone, _ in limits]
        for zone in zones:
            if zones.count(zone) > 1:
                raise ValueError(f"zone '{zone}' is given twice")
        return tuple(f"{zone}={limit:g}" for zone, limit in limits)

    def problems(self) -> Iterator[tuple[str, str]]:
        if not 0.2 <= self.interval_s <= 60:
            yield "interval_s", f"expected 0.2..60 seconds, got {self.interval_s:g}"
        if self.temperature_critical_c <= self.temperature_warn_c:
            yield (
                "temperature_critical_c",
                f"expected more than temperature_warn_c ({self.temperature_warn_c:g}), "
                f"got {self.temperature_critical_c:g}",
            )
        if self.memory_critical_pct <= self.memory_warn_pct:
            yield (
                "memory_critical_pct",
                f"expected more than memory_warn_pct ({self.memory_warn_pct:g}), "
                f"got {self.memory_critical_pct:g}",
            )
        for name in ("memory_warn_pct", "memory_critical_pct", "spool_warn_pct"):
            value = getattr(self, name)
            if not 0 < value <= 100:
                yield name, f"expected a percentage in (0, 100], got {value:g}"
        for name in ("temperature_clear_c", "memory_clear_pct", "spool_clear_pct"):
            value = getattr(self, name)
            if not 0 <= value <= 50:
                yield name, f"expected 0..50, got {value:g}"
        for name in (
            "temperature_for_s",
            "memory_for_s",
            "stream_down_after_s",
            "rollout_rejected_clear_after_s",
            "mqtt_offline_after_s",
        ):
            value = getattr(self, name)
            if not 0 <= value <= 86400:
                yield name, f"expected 0..86400 seconds, got {value:g}"


def _zone_limit(item: str) -> tuple[str, float]:
    zone, sep, text = item.partition("=")
    zone = zone.strip()
    try:
        limit = float(text)
    except ValueError:
        limit = math.nan
    if not sep or not zone or not math.isfinite(limit):
        raise ValueError(f"expected ZONE=C (e.g. gpu=85), got {item!r}")
    if not -40 <= limit <= 150:
        raise ValueError(f"zone '{zone}': expected -40..150 °C, got {limit:g}")
    return zone, limit
