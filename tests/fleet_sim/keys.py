"""The operator's key pair the simulated devices trust."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class OperatorKey(NamedTuple):
    private: Path
    public: Path
