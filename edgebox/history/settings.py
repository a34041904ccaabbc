"""The ``history:`` section of the daemon's settings (docs/configuration.md).

On by default: the section may be left out, and each field set alone
(``EDGEBOX_HISTORY_ENABLED=false``, ``--history-persist-interval-s 600``).
Parsed by ``edgebox/settings/`` like every section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

MAX_SERIES_LIMIT = 256


@dataclasses.dataclass(frozen=True)
class HistorySettings:
    """The dashboard's history of request figures and telemetry (edgebox/history/)."""

    enabled: bool = True
    """false: no history thread, no history file; the dashboard's charts then
    show only the live 15 minutes of telemetry."""
    interval_s: float = 5.0
    """Seconds between two readings of the counters (1..20): the step of the
    15 min tier. The 1 h and 24 h tiers step 20 s and 8 min whatever it is."""
    max_series: int = 32
    """Most (model, version) pairs recorded (1..256); a new one past it gets
    no history (logged once)."""
    persist_interval_s: float = 300.0
    """Seconds between writes of the 1 h and 24 h tiers to
    ``<state_directory>/history.json.gz`` (60..86400), plus one at a clean
    stop. Bytes written per hour: docs/dashboard.md, "History"."""

    def problems(self) -> Iterator[tuple[str, str]]:
        if not 1 <= self.interval_s <= 20:
            yield "interval_s", f"expected 1..20 seconds, got {self.interval_s}"
        if not 1 <= self.max_series <= MAX_SERIES_LIMIT:
            yield "max_series", f"expected 1..{MAX_SERIES_LIMIT}, got {self.max_series}"
        if not 60 <= self.persist_interval_s <= 86400:
            yield "persist_interval_s", f"expected 60..86400 seconds, got {self.persist_interval_s}"
