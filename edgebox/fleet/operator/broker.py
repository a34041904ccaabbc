"""The operator's MQTT connection: the retained messages of a few topic
filters, kept current, and retained QoS 1 publishing.

A deploy lasts minutes and brokers restart, so the client reconnects on its
own (paho's loop) and subscribes again on every connection, which brings the
retained messages back; what it has seen is kept across reconnects, since a
retained message still stands until the broker says otherwise.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edgebox.errors import EdgeboxError, Unavailable
from edgebox.mqtt.settings import parse_broker_url

CONNECT_TIMEOUT_S = 10.0
SETTLE_PROBE_TIMEOUT_S = 5.0
"""How long the settle waits for its own probe message when the broker does
not echo it (an ACL that forbids the probe topic); the settle then ends."""


class BrokerUnreachable(Unavailable):
    """No broker answered, or it refused the connection."""


@dataclass(frozen=True)
class BrokerOptions:
    url: str
    ca_file: Path | None = None
    username: str = ""
    password_file: Path | None = None

    def password(self) -> str | None:
        """Read now, one line, blanks dropped; the error names the file, never
        its contents."""
        if self.password_file is None:
            return None
        try:
            return self.password_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise EdgeboxError(f"cannot read '{self.password_file}': {exc.strerror}") from None
        except UnicodeDecodeError:
            raise EdgeboxError(f"'{self.password_file}' is not UTF-8 text") from None


class FleetBroker:
    """The latest message of every topic the filters match, retained or sent
    live since (both are what the topic says now; an empty payload clears it).

    Thread use: paho's network thread fills ``_retained``; the command's
    thread reads snapshots and waits on ``_changed``."""

    def __init__(self, options: BrokerOptions, filters: list[str]) -> None:
        self._options = options
        self._url = parse_broker_url(options.url)
        self._filters = list(filters)
        self._probe_topic = ""
        self._changed = threading.Condition()
        self._retained: dict[str, bytes] = {}
        self._version = 0
        self._connack: list[object] = []
        self._subscribed = 0
        self._probe_seen = False
        self.client = self._new_client()

    def _new_client(self) -> mqtt.Client:
        url = self._url
        client = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=f"edgebox-fleet-{uuid.uuid4().hex[:12]}",
            protocol=mqtt.MQTTv311,
            transport=url.transport,
        )
        client.connect_timeout = 5.0
        client.reconnect_delay_set(0.2, 5)
        if url.transport == "websockets" and url.path:
            client.ws_set_options(path=url.path)
        if url.tls:
            ca = None if self._options.ca_file is None else str(self._options.ca_file)
            client.tls_set(ca_certs=ca)
        if self._options.username:
            client.username_pw_set(self._options.username, self._options.password())
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        return client

    def connect(self, probe_topic: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        """Connected and subscribed to the filters and to ``probe_topic`` (a
        topic of the operator's own, see ``settle``); BrokerUnreachable
        otherwise."""
        self._probe_topic = probe_topic
        try:
            self.client.connect(self._url.host, self._url.port, keepalive=30)
        except (OSError, ValueError) as exc:
            raise BrokerUnreachable(f"broker '{self._options.url}': {exc}") from None
        self.client.loop_start()
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._connack or (
                not _failed(self._connack[-1]) and self._subscribed < len(self._filters) + 1
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise BrokerUnreachable(
                        f"broker '{self._options.url}': no answer within {timeout_s:g}s"
                    )
                self._changed.wait(left)
            reason = self._connack[-1]
        if _failed(reason):
            self.close()
            raise BrokerUnreachable(f"broker '{self._options.url}' refused: {reason}")

    def settle(self, settle_s: float) -> None:
        """Let the retained messages arrive: until the broker echoes a probe
        published after the subscriptions (a broker delivers the retained
        messages of a subscription before later traffic on the connection),
        and at least ``settle_s``, for clustered brokers that deliver them
        from several nodes."""
        start = time.monotonic()
        with self._changed:
            self._probe_seen = False
        self.client.publish(self._probe_topic, b"", qos=1, retain=False)
        deadline = start + max(settle_s, SETTLE_PROBE_TIMEOUT_S)
        with self._changed:
            while not self._probe_seen and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
        left = start + settle_s - time.monotonic()
        if left > 0:
            time.sleep(left)

    def snapshot(self) -> tuple[int, dict[str, bytes]]:
        """A change counter and the retained payloads seen, topic -> bytes."""
        with self._changed:
            return self._version, dict(self._retained)

    def wait_for_change(self, seen_version: int, timeout_s: float) -> None:
        with self._changed:
            if self._version == seen_version:
                self._changed.wait(max(timeout_s, 0.0))

    def publish_retained(self, topic: str, payload: bytes, timeout_s: float) -> None:
        """Returns once the broker acknowledged (QoS 1). While the connection
        is down (a broker restart between waves), waits for paho to reconnect
        and sends it then; BrokerUnreachable at the deadline."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.client.is_connected():
                info = self.client.publish(topic, payload, qos=1, retain=True)
                try:
                    info.wait_for_publish(max(deadline - time.monotonic(), 0.0))
                except RuntimeError:
                    pass
                if info.is_published():
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrokerUnreachable(
                    f"publishing on '{topic}': no acknowledgement within {timeout_s:g}s"
                )
            with self._changed:
                self._changed.wait(min(left, 0.5))

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def __enter__(self) -> FleetBroker:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.close()

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        with self._changed:
            self._connack.append(reason_code)
            self._subscribed = 0
            self._changed.notify_all()
        if not _failed(reason_code):
            for topic_filter in [*self._filters, self._probe_topic]:
                client.subscribe(topic_filter, qos=1)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        with self._changed:
            self._subscribed += 1
            self._changed.notify_all()

    def _on_message(self, client, userdata, message) -> None:
        with self._changed:
            if message.topic == self._probe_topic:
                self._probe_seen = True
            elif message.payload:
                self._retained[message.topic] = bytes(message.payload)
            else:
                self._retained.pop(message.topic, None)
            self._version += 1
            self._changed.notify_all()


def _failed(reason_code) -> bool:
    return bool(getattr(reason_code, "is_failure", False))
