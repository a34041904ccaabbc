"""The fleet agent's figures, protocol-neutral: the agent writes them as it
works, the metrics collector reads a snapshot at scrape time
(``edgebox/metrics/fleet_families.py``), and neither knows the other."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

REFUSAL_KINDS = ("signature", "key", "group", "generation", "malformed", "artifact")
"""Why a document was refused, as ``edgebox_fleet_documents_refused_total``'s
``reason_kind`` labels: each exported (0 included) so ``increase()`` sees the first."""


@dataclass(frozen=True)
class FleetSnapshot:
    generation: int
    """The last document applied; 0: none yet."""
    models: dict[str, str] = field(default_factory=dict)
    """Model -> its state now (``downloading`` ... ``not_targeted``)."""
    download_bytes: int = 0
    """Artifact bytes received since start, resumed downloads' included."""
    refused: dict[str, int] = field(default_factory=dict)
    """Reason kind -> documents refused since start; every kind present."""


class FleetFigures:
    """Thread-safe: the agent's thread writes, the scrape threads read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._models: dict[str, str] = {}
        self._download_bytes = 0
        self._refused = dict.fromkeys(REFUSAL_KINDS, 0)

    def set_generation(self, generation: int) -> None:
        with self._lock:
            self._generation = generation

    def set_model_state(self, model: str, state: str | None) -> None:
        """None: the model left the document (its series go)."""
        with self._lock:
            if state is None:
                self._models.pop(model, None)
            else:
                self._models[model] = state

    def add_download_bytes(self, count: int) -> None:
        if count < 0:
            raise ValueError(f"a byte count cannot go down, got {count}")
        with self._lock:
            self._download_bytes += count

    def count_refusal(self, kind: str) -> None:
        """Raises ValueError for a kind not in ``REFUSAL_KINDS`` (a typo in
        the agent would otherwise make a label nobody alerts on)."""
        if kind not in REFUSAL_KINDS:
            raise ValueError(f"refusal kind {kind!r}: expected one of {', '.join(REFUSAL_KINDS)}")
        with self._lock:
            self._refused[kind] += 1

    def snapshot(self) -> FleetSnapshot:
        with self._lock:
            return FleetSnapshot(
                self._generation, dict(self._models), self._download_bytes, dict(self._refused)
            )
