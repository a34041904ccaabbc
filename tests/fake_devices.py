"""``FakeDevice``: a device as the operator's commands see it over MQTT, and
nothing more. A fake: no daemon, no repository, no download. It takes the
group's desired state with the fleet's own code (``TrustedKeys.open``,
``parse_document``, ``targets_device``) and answers with the retained
reports and status FLEET_SPEC describes, so ``edgebox fleet`` can be tested
before (and apart from) the real agent.

Behaviours: serves every version it is sent (``downloading`` then
``serving``), unless the version is in ``rejects`` (``rejected`` with that
reason); ``go_offline()`` leaves a retained ``offline`` status and stops
answering, as a device switched off mid-deploy does.
"""

from __future__ import annotations

import json
import threading
import time

from daemon_process import wait_for
from edgebox.fleet.document import REPORTED_SCHEMA, desired_topic, parse_document, reported_topic
from edgebox.fleet.signing import Refused, TrustedKeys
from edgebox.fleet.targeting import targets_device
from mosquitto_broker import make_client


class FakeDevice:
    """Callbacks run on paho's network thread; ``documents`` and ``reports``
    are read by the test through copies."""

    def __init__(
        self,
        broker,
        prefix: str,
        group: str,
        device: str,
        trusted: TrustedKeys,
        *,
        serving: dict[str, int] | None = None,
        rejects: dict[int, str] | None = None,
    ) -> None:
        self.prefix = prefix
        self.group = group
        self.device = device
        self._trusted = trusted
        self._rejects = dict(rejects or {})
        self._lock = threading.Lock()
        self.generation = 0
        self.models: dict[str, dict] = {
            name: {"state": "serving", "version": version, "served": [version], "reason": ""}
            for name, version in (serving or {}).items()
        }
        self.refused: dict | None = None
        self.documents: list[int] = []
        """Generations of the documents this device applied, in order."""
        self._status_topic = f"{prefix}/{device}/status"
        self._subscribed = threading.Event()
        self._broker = broker
        self.client = make_client(broker, client_id=f"fake-{device}-{time.monotonic_ns()}")
        self.client.will_set(self._status_topic, self._status("offline"), qos=1, retain=True)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message

    def start(self) -> FakeDevice:
        """Online, its first report and status retained, subscribed."""
        self.client.connect("127.0.0.1", self._broker.port, keepalive=30)
        self.client.loop_start()
        wait_for(self._subscribed.is_set, 10, what=f"fake device '{self.device}' subscribed")
        self._publish(self._status_topic, self._status("online")).wait_for_publish(10)
        self._report().wait_for_publish(10)
        return self

    def go_offline(self) -> None:
        """Retained ``offline``, as a last will leaves it; no more answers."""
        self.client.on_message = None
        self._publish(self._status_topic, self._status("offline")).wait_for_publish(10)
        self.close()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        client.subscribe(desired_topic(self.prefix, self.group), qos=1)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        self._subscribed.set()

    def _on_message(self, client, userdata, message) -> None:
        try:
            data, signer = self._trusted.open(bytes(message.payload))
            document = parse_document(data)
        except Refused as refusal:
            self._refuse(None, refusal.reason, refusal.key_id)
            return
        if document.group != self.group:
            self._refuse(document.generation, f"document for group '{document.group}'", signer)
            return
        if document.generation <= self.generation:
            return
        with self._lock:
            self.generation = document.generation
            self.documents.append(document.generation)
        changed = []
        for name, wanted in document.models.items():
            entry = self.models.get(name, {"served": []})
            if not targets_device(wanted.targets, self.group, name, self.device):
                self.models[name] = {**entry, "state": "not_targeted", "reason": ""}
                continue
            if wanted.version in self._rejects:
                reason = self._rejects[wanted.version]
                self.models[name] = {**entry, "state": "rejected", "version": wanted.version,
                                     "reason": reason}  # fmt: skip
                continue
            self.models[name] = {**entry, "state": "downloading", "version": wanted.version,
                                 "reason": ""}  # fmt: skip
            changed.append((name, wanted.version))
        self._report()
        for name, version in changed:
            self.models[name] = {"state": "serving", "version": version, "served": [version],
                                 "reason": ""}  # fmt: skip
        if changed:
            self._report()

    def _refuse(self, generation: int | None, reason: str, key_id: str) -> None:
        self.refused = {"generation": generation, "key_id": key_id, "reason": reason,
                        "at": time.time()}  # fmt: skip
        self._report()

    def _report(self):
        body = {
            "schema": REPORTED_SCHEMA,
            "device": self.device,
            "group": self.group,
            "generation": self.generation,
            "at": time.time(),
            "models": self.models,
            "refused": self.refused,
        }
        return self._publish(reported_topic(self.prefix, self.device), json.dumps(body).encode())

    def _status(self, state: str) -> bytes:
        body = {"schema": {"name": "edgebox.status", "version": 1}, "state": state,
                "device": self.device, "timestamp": time.time()}  # fmt: skip
        return json.dumps(body).encode()

    def _publish(self, topic: str, payload: bytes):
        return self.client.publish(topic, payload, qos=1, retain=True)
