"""What every event on the bus is: a frozen dataclass naming its JSON schema.

``as_dict`` is the one JSON form of an event, the payload MQTT publishes and
the dashboard shows. It opens with ``schema`` (name and version) so a
subscriber can tell payloads apart and notice a format change; a change that
renames or removes a field bumps ``SCHEMA_VERSION``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, ClassVar


def _json_fields(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: value.value if isinstance(value, enum.Enum) else value for key, value in items}


class Event:
    """Base of every event type; subclasses are ``@dataclass(frozen=True)``.

    Events are shared between threads (the bus hands the same object to every
    subscriber), hence frozen; a dict field is shared too and must be treated
    as read-only."""

    SCHEMA: ClassVar[str]
    """The payload's schema name, ``edgebox.<noun>``; one per event type."""
    SCHEMA_VERSION: ClassVar[int] = 1

    def as_dict(self) -> dict[str, Any]:
        """``{"schema": {"name", "version"}, <fields in declaration order>}``,
        enums as their values; ``json.dumps`` takes it as is."""
        fields = dataclasses.asdict(self, dict_factory=_json_fields)  # type: ignore[call-overload]
        schema = {"name": self.SCHEMA, "version": self.SCHEMA_VERSION}
        return {"schema": schema, **self._rounded(fields)}

    def _rounded(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Hook for an event whose floats are sent rounded; the default sends them as they are."""
        return fields
