"""Model version states, as Triton names them, each with a reason."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ModelState(enum.Enum):
    UNKNOWN = "UNKNOWN"
    LOADING = "LOADING"
    READY = "READY"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(frozen=True)
class VersionStatus:
    state: ModelState
    reason: str = ""
