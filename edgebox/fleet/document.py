"""The desired state of a group of devices: which version of which model,
where its artifact is, how it rolls out and which devices it is for
(docs/fleet.md, ``docs/schemas/fleet_desired.schema.json``).

A document arrives from the broker, so it is read as hostile input even
after its signature verified (a trusted key can still sign a mistake):
every field is checked for type and range, unknown fields are refused rather
than ignored (an older device must not half-apply a newer document), and
sizes are bounded before anything is allocated for them. Whatever is wrong
raises ``Refused`` with the field's path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from edgebox.fleet.signing import Refused
from edgebox.mqtt.topics import topic_level
from edgebox.repository.names import model_name_problem

SCHEMA = "edgebox.fleet.desired/1"
REPORTED_SCHEMA = "edgebox.fleet.reported/1"
MAX_DOCUMENT_BYTES = 256 * 1024
MAX_MODELS = 64
MAX_DEVICES = 10_000
MODEL_STATES = (
    "downloading",
    "verifying",
    "rolling_out",
    "serving",
    "rejected",
    "failed",
    "not_targeted",
)
GROUP_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A group is one topic level, as a device id is (mqtt settings)."""
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_URL = 2048
_MAX_VERSION = 2**63 - 1


@dataclass(frozen=True)
class Artifact:
    url: str
    sha256: str
    size: int

    def as_dict(self) -> dict:
        return {"url": self.url, "sha256": self.sha256, "size": self.size}


@dataclass(frozen=True)
class Targets:
    all: bool = False
    devices: tuple[str, ...] = ()
    percent: int = 0

    def as_dict(self) -> dict:
        if self.all:
            return {"all": True}
        found: dict[str, Any] = {}
        if self.devices:
            found["devices"] = list(self.devices)
        if self.percent:
            found["percent"] = self.percent
        return found


@dataclass(frozen=True)
class WantedModel:
    name: str
    version: int
    artifact: Artifact
    targets: Targets = field(default_factory=lambda: Targets(all=True))
    rollout: dict | None = None
    """The on-device rollout policy's fields (``rollout_policy.RolloutPolicy``)
    for this version; None: the device's own policy for the model."""
    previous: tuple[int, Artifact] | None = None
    """What ``edgebox fleet rollback`` returns to."""

    def as_dict(self) -> dict:
        found: dict[str, Any] = {
            "version": self.version,
            "artifact": self.artifact.as_dict(),
            "targets": self.targets.as_dict(),
        }
        if self.rollout is not None:
            found["rollout"] = dict(self.rollout)
        if self.previous is not None:
            version, artifact = self.previous
            found["previous"] = {"version": version, "artifact": artifact.as_dict()}
        return found


@dataclass(frozen=True)
class Desired:
    group: str
    generation: int
    issued_at: str
    models: dict[str, WantedModel]

    def as_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "group": self.group,
            "generation": self.generation,
            "issued_at": self.issued_at,
            "models": {name: wanted.as_dict() for name, wanted in sorted(self.models.items())},
        }


def document_bytes(desired: Desired) -> bytes:
    """The canonical encoding the operator signs: sorted keys, no spaces, UTF-8."""
    return json.dumps(
        desired.as_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def desired_topic(prefix: str, group: str) -> str:
    return f"{prefix}/fleet/{topic_level(group)}/desired"


def reported_topic(prefix: str, device: str) -> str:
    return f"{prefix}/{topic_level(device)}/fleet"


def parse_document(data: bytes) -> Desired:
    """The document in ``data``; Refused (kind ``malformed``) naming the
    first field that is wrong."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise Refused(f"document of {len(data)} bytes exceeds {MAX_DOCUMENT_BYTES}")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(f"document is not JSON: {exc}") from None
    where = _Path("document")
    body = where.object(
        raw, required={"schema", "group", "generation", "models"}, optional={"issued_at"}
    )
    if body["schema"] != SCHEMA:
        raise Refused(f"{where}.schema: expected '{SCHEMA}', got {body['schema']!r}")
    group = where.field("group").text(body["group"])
    if not GROUP_PATTERN.fullmatch(group):
        raise Refused(f"{where}.group: {group!r} is not a group name (letters, digits, _ . -)")
    generation = where.field("generation").integer(body["generation"], 1, _MAX_VERSION)
    issued_at = where.field("issued_at").text(body.get("issued_at", ""), 64)
    models_path = where.field("models")
    models = models_path.object(body["models"])
    if len(models) > MAX_MODELS:
        raise Refused(f"{models_path}: {len(models)} models, at most {MAX_MODELS}")
    wanted = {name: _wanted(models_path.field(name), name, entry) for name, entry in models.items()}
    return Desired(group, generation, issued_at, wanted)


def _wanted(where: _Path, name: str, entry: object) -> WantedModel:
    problem = model_name_problem(name)
    if problem is not None:
        raise Refused(f"{where}: not a model name: {problem}")
    body = where.object(
        entry, required={"version", "artifact"}, optional={"targets", "rollout", "previous"}
    )
    version = where.field("version").integer(body["version"], 1, _MAX_VERSION)
    artifact = _artifact(where.field("artifact"), body["artifact"])
    targets = _targets(where.field("targets"), body.get("targets", {"all": True}))
    rollout = None
    if "rollout" in body:
        rollout = where.field("rollout").object(body["rollout"])
    previous = None
    if "previous" in body:
        back = where.field("previous")
        fields = back.object(body["previous"], required={"version", "artifact"})
        previous = (
            back.field("version").integer(fields["version"], 1, _MAX_VERSION),
            _artifact(back.field("artifact"), fields["artifact"]),
        )
    return WantedModel(name, version, artifact, targets, rollout, previous)


def _artifact(where: _Path, entry: object) -> Artifact:
    body = where.object(entry, required={"url", "sha256", "size"})
    url = where.field("url").text(body["url"], _MAX_URL)
    if not url.startswith(("http://", "https://")):
        raise Refused(f"{where}.url: only http:// and https:// artifacts are fetched")
    sha256 = where.field("sha256").text(body["sha256"], 64)
    if not _SHA256.fullmatch(sha256):
        raise Refused(f"{where}.sha256: expected 64 lowercase hex digits")
    size = where.field("size").integer(body["size"], 1, _MAX_VERSION)
    return Artifact(url, sha256, size)


def _targets(where: _Path, entry: object) -> Targets:
    body = where.object(entry, optional={"all", "devices", "percent"})
    if not body:
        raise Refused(f"{where}: name all, devices or percent")
    if "all" in body:
        if body["all"] is not True or len(body) > 1:
            raise Refused(f"{where}.all: must be true and alone")
        return Targets(all=True)
    devices: tuple[str, ...] = ()
    if "devices" in body:
        listed = body["devices"]
        if not isinstance(listed, list) or len(listed) > MAX_DEVICES:
            raise Refused(f"{where}.devices: a list of at most {MAX_DEVICES} device ids")
        devices = tuple(where.field("devices").text(device, 128) for device in listed)
    percent = where.field("percent").integer(body.get("percent", 0), 0, 100)
    return Targets(False, devices, percent)


class _Path:
    """A field's path in the document, for messages, with its type checks."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __str__(self) -> str:
        return self._text

    def field(self, name: str) -> _Path:
        return _Path(f"{self._text}.{name}")

    def object(
        self, value: object, required: set[str] = frozenset(), optional: set[str] | None = None
    ) -> dict:
        if not isinstance(value, dict):
            raise Refused(f"{self}: expected an object")
        missing = sorted(required - set(value))
        if missing:
            raise Refused(f"{self}: missing {', '.join(missing)}")
        if optional is not None:
            unknown = sorted(set(value) - required - optional)
            if unknown:
                raise Refused(f"{self}: unknown field(s) {', '.join(unknown)}")
        return value

    def text(self, value: object, limit: int = 256) -> str:
        if not isinstance(value, str):
            raise Refused(f"{self}: expected a string")
        if len(value) > limit or any(ord(c) < 0x20 for c in value):
            raise Refused(f"{self}: longer than {limit} characters or holds control characters")
        return value

    def integer(self, value: object, low: int, high: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise Refused(f"{self}: expected an integer")
        if not low <= value <= high:
            raise Refused(f"{self}: {value} is outside {low}..{high}")
        return value
