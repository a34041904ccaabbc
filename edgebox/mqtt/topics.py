"""Where each message goes: ``{prefix}/{device}/...`` (docs/mqtt.md).

A topic level comes from names a user chose (a device's hostname, a model's
folder name), and MQTT forbids ``+``, ``#`` and NUL in a published topic and
gives ``/`` a meaning: those become ``_`` so that a model called ``a+b`` still
publishes, to a topic a subscriber can name.
"""

from __future__ import annotations

import re

_NOT_IN_A_LEVEL = re.compile(r"[+#/\x00]")


def topic_level(name: str) -> str:
    """``name`` as one topic level."""
    return _NOT_IN_A_LEVEL.sub("_", name) or "_"


class Topics:
    def __init__(self, prefix: str, device: str) -> None:
        self.root = f"{prefix}/{topic_level(device)}"

    @property
    def status(self) -> str:
        """Retained: ``online`` while connected, ``offline`` (the last will or
        a clean shutdown) otherwise."""
        return f"{self.root}/status"

    @property
    def fleet(self) -> str:
        """Retained: the fleet agent's reported state (docs/fleet.md)."""
        return f"{self.root}/fleet"

    @property
    def events(self) -> str:
        return f"{self.root}/events"

    @property
    def telemetry(self) -> str:
        return f"{self.root}/telemetry"

    def stream_results(self, stream: str) -> str:
        return f"{self.root}/streams/{topic_level(stream)}/results"

    def model_results(self, model: str) -> str:
        return f"{self.root}/models/{topic_level(model)}/results"
