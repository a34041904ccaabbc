"""The ``fleet:`` section of the daemon's settings (docs/configuration.md).

Parsed by ``edgebox/settings/`` like every section. Only what can be judged
without the fleet's code is judged here: the group is a topic level, each
trusted key file can be opened. Parsing the keys is the signing module's job
(``edgebox.fleet.signing.load_public_key``), done when the agent starts, so
one format has one parser. The device id, the broker and its TLS come from
``mqtt:``; ``Settings.problems()`` checks that it is there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from edgebox.mqtt.settings import topic_level_problem

DEFAULT_DOWNLOAD_DIR = Path("/var/lib/edgebox/fleet")


@dataclasses.dataclass(frozen=True)
class FleetSettings:
    """This device's place in a fleet: whose desired state it follows and
    whose signatures it believes; absent from the settings means no agent."""

    group: str = dataclasses.field(default="", metadata={"default_help": "none, required"})
    """The fleet group this device belongs to (required): it follows the
    signed desired state retained on ``{topic_prefix}/fleet/{group}/desired``.
    One topic level: 1-64 letters, digits, ``_``, ``.`` or ``-``."""
    trusted_keys: tuple[Path, ...] = dataclasses.field(
        default=(), metadata={"default_help": "none, at least one"}
    )
    """Ed25519 public key files (PEM, as ``edgebox fleet keygen`` writes
    ``KEY.pub``) whose signatures the device accepts; at least one, each
    readable at start. Several allow a key rotation: trust the new key
    everywhere, then sign with it."""
    artifact_max_mb: float = 512
    """Largest artifact (a packed model version) the device downloads, in MB;
    a document naming a bigger one is refused."""
    download_dir: Path = DEFAULT_DOWNLOAD_DIR
    """Where artifacts are downloaded (resumed after a restart or a broken
    link) and checked before they are unpacked into the repository; also
    where the last applied generation is kept."""
    ca_file: Path | None = None
    """CA certificates (PEM) that ``https://`` artifact servers are checked
    against; none: the system's."""

    @classmethod
    def parse_field(cls, name: str, raw: Any, coerce: Callable[[Any], Any]) -> Any:
        """``trusted_keys`` as paths (a YAML list, or text with the files
        separated by commas from the environment or a flag)."""
        value = coerce(raw)
        if name == "trusted_keys":
            return tuple(Path(item) for item in value)
        return value

    @property
    def artifact_max_bytes(self) -> int:
        return int(self.artifact_max_mb * 1024 * 1024)

    def problems(self) -> Iterator[tuple[str, str]]:
        """Each ``(field, message)`` wrong, checked at startup."""
        if not self.group:
            yield "group", "required: the fleet group whose desired state this device follows"
        elif problem := topic_level_problem(self.group):
            yield "group", problem
        if not self.trusted_keys:
            yield (
                "trusted_keys",
                "needs at least one public key file (edgebox fleet keygen writes KEY.pub)",
            )
        for path in self.trusted_keys:
            if problem := _unreadable(path):
                yield "trusted_keys", problem
        if not self.artifact_max_mb > 0:
            yield "artifact_max_mb", f"expected a number > 0, got {self.artifact_max_mb}"
        if self.download_dir.exists() and not self.download_dir.is_dir():
            yield "download_dir", f"'{self.download_dir}' exists and is not a folder"
        if self.ca_file is not None and (problem := _unreadable(self.ca_file)):
            yield "ca_file", problem


def _unreadable(path: Path) -> str | None:
    try:
        with open(path, "rb"):
            return None
    except OSError as exc:
        return f"cannot read '{path}': {exc.strerror}"
