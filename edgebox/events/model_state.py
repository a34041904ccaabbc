"""A model version's lifecycle state changed (loading, ready, unavailable, unloaded)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class ModelStateChanged(Event):
    """Published by the model registry on every state change, from the thread
    that changed it (a load, an unload, the repository poller)."""

    SCHEMA: ClassVar[str] = "edgebox.model_state"

    model: str
    version: int | None
    """None for model-level states (a config that cannot be read has no versions)."""
    state: str
    """The registry's state name, as ``/v2/repository/index`` shows it (``READY``, ...)."""
    reason: str = ""
    timestamp: float = field(default_factory=time.time)
