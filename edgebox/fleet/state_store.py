"""The last desired state this device applied, kept across restarts in
``<state_directory>/fleet.json``: its generation (a document is accepted only
with a newer one, so a replayed old document cannot roll a device back) and
the signed envelope itself, so the device goes on reconciling towards it
after a restart with no broker in sight.

Written only when a document is accepted: a few kilobytes per deploy. The
write is atomic (temporary file, fsync, rename) so a power cut leaves the old
state or the new one, never half of either.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("edgebox.fleet")

FILE_NAME = "fleet.json"


@dataclass(frozen=True)
class Applied:
    generation: int = 0
    envelope: bytes = b""


class FleetStore:
    def __init__(self, state_directory: Path) -> None:
        self.path = state_directory / FILE_NAME

    def load(self) -> Applied:
        """What was applied last; nothing (generation 0) when the file is
        missing, and also when it is unreadable, which is logged: a device
        must start even so, and a newer document still brings it back."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return Applied(int(data["generation"]), base64.b64decode(data["envelope"]))
        except FileNotFoundError:
            return Applied()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("fleet: ignoring unreadable %s (%s)", self.path, exc)
            return Applied()

    def save(self, applied: Applied) -> None:
        document = {
            "generation": applied.generation,
            "envelope": base64.b64encode(applied.envelope).decode("ascii"),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{FILE_NAME}.tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(document, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
