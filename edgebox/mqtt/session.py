"""One connection to the broker, from CONNECT until it is lost: a fresh paho
client (see connection.py), the rows in flight on it, and the row cursor.

Rows go out in spool order, at most ``max_inflight`` unacknowledged; the
cursor is the highest row sent in order on this connection, so the next
rows are read from the spool above it. Everything here runs on the MQTT
thread: paho's callbacks fire inside ``pump``.
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Callable

import paho.mqtt.client as mqtt

from edgebox.mqtt.connection import LastWill, login_refused, new_client, open_connection
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.spool import Spool, Spooled
from edgebox.mqtt.subscriptions import SUBSCRIBE_QOS, Subscriptions
from edgebox.mqtt.waker import Waker

log = logging.getLogger("edgebox.mqtt")

CONNECT_ERRORS = (OSError, ValueError, mqtt.WebsocketConnectionError)


class BrokerSession:
    def __init__(
        self,
        settings: MqttSettings,
        will: LastWill,
        on_connected: Callable[[BrokerSession], None],
        connack_timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        on_status: Callable[[bytes], None] | None = None,
        subscriptions: Subscriptions | None = None,
    ) -> None:
        """``on_status``: each message on the will's (the status) topic, which
        the session subscribes to before ``on_connected`` publishes there.
        ``subscriptions``: the other filters, subscribed on the CONNACK and
        kept in step while connected (``sync_subscriptions``)."""
        self._settings = settings
        self._on_connected = on_connected
        self._connack_timeout_s = connack_timeout_s
        self._clock = clock
        self._status_topic = will.topic
        self._on_status = on_status
        self._subscriptions = subscriptions or Subscriptions()
        self._subscribed_topics: set[str] = set()
        self._subscribed_version = -1
        self._subscribing: dict[int, list[str]] = {}
        """SUBSCRIBE message id -> its filters, in order, for the SUBACK."""
        self._client = new_client(settings, will)
        self._client.on_connect = self._connack
        self._client.on_disconnect = self._disconnected
        self._client.on_publish = self._puback
        self._client.on_message = self._message
        self._client.on_subscribe = self._subscribed
        self._connack_deadline = 0.0
        self._in_flight: dict[int, int] = {}
        """paho message id -> spool row id."""
        self._early: set[int] = set()
        """Message ids paho acknowledged before ``publish`` returned them (QoS 0)."""
        self._acked: list[int] = []
        self._cursor = 0
        self.connected = False
        self.lost_reason: str | None = None
        self.refusal: str | None = None
        """The broker's reason, when it refused the credentials themselves."""
        self.sent = 0
        self.acknowledged = 0
        self.rejected = 0

    def open(self) -> None:
        """Connect the socket and send CONNECT; raises one of ``CONNECT_ERRORS``."""
        open_connection(self._client, self._settings)
        self._connack_deadline = self._clock() + self._connack_timeout_s

    def publish(self, row: Spooled) -> bool:
        """Send ``row`` now (out of the cursor's order: the status that opens
        a connection); False when the connection is gone."""
        info = self._client.publish(row.topic, row.payload, qos=row.qos, retain=row.retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            self.lost_reason = self.lost_reason or f"publish failed: {mqtt.error_string(info.rc)}"
            return False
        self.sent += 1
        if info.mid in self._early:
            self._early.discard(info.mid)
            self._acknowledged(row.row_id, None)
        else:
            self._in_flight[info.mid] = row.row_id
        return True

    def send_window(self, spool: Spool) -> None:
        """The next rows above the cursor, until ``max_inflight`` are unacknowledged."""
        room = self._settings.max_inflight - len(self._in_flight)
        if room <= 0 or not self.connected:
            return
        sent = set(self._in_flight.values())
        for row in spool.pending(room + 1, after_row_id=self._cursor):
            if row.row_id in sent:
                continue
            if not self.publish(row):
                return
            self._cursor = row.row_id
            room -= 1
            if room == 0:
                return

    def sync_subscriptions(self) -> None:
        """Subscribe to filters added since the CONNACK, unsubscribe from
        those removed (the MQTT thread, while connected)."""
        if not self.connected or self._subscriptions.version == self._subscribed_version:
            return
        self._subscribed_version = self._subscriptions.version
        wanted = set(self._subscriptions.topics())
        gone = sorted(self._subscribed_topics - wanted)
        if gone:
            self._client.unsubscribe(gone)
        self._subscribe(sorted(wanted - self._subscribed_topics))
        self._subscribed_topics = wanted

    def in_flight(self, row_id: int) -> bool:
        return row_id in self._in_flight.values()

    def pump(self, timeout_s: float, waker: Waker | None = None) -> list[int]:
        """paho's network work for up to ``timeout_s``, or until ``waker``
        fires (an event to send); the rows acknowledged meanwhile (to
        delete). Sets ``lost_reason`` when the connection is gone or the
        CONNACK is overdue.

        The wait is paho's own ``loop`` taken apart (its documented external
        loop: ``loop_read``, ``loop_write``, ``loop_misc``) so that it can
        wait on the waker as well as the broker's socket."""
        if not self.connected and self._clock() > self._connack_deadline:
            self.lost_reason = f"no answer to CONNECT within {self._connack_timeout_s:g} s"
            return []
        result = self._loop(timeout_s, waker)
        if result != mqtt.MQTT_ERR_SUCCESS:
            self.lost_reason = self.lost_reason or mqtt.error_string(result)
        acked, self._acked = self._acked, []
        return acked

    def _loop(self, timeout_s: float, waker: Waker | None) -> int:
        client = self._client
        sock = client.socket()
        if sock is None:
            return mqtt.MQTT_ERR_NO_CONN
        pending = sock.pending() if hasattr(sock, "pending") else 0  # TLS: bytes already read
        readers = [sock] if waker is None else [sock, waker]
        writers = [sock] if client.want_write() else []
        try:
            readable, writable, _ = select.select(
                readers, writers, [], 0.0 if pending else timeout_s
            )
        except (OSError, TypeError, ValueError):
            return mqtt.MQTT_ERR_CONN_LOST
        if waker is not None and waker in readable:
            waker.drain()
        if sock in readable or pending:
            result = client.loop_read()
            if result or client.socket() is None:
                return result
        if sock in writable:
            result = client.loop_write()
            if result or client.socket() is None:
                return result
        return client.loop_misc()

    def close(self, clean: bool) -> None:
        """``clean``: DISCONNECT, so the broker drops the last will; else just
        the socket."""
        client = self._client
        if clean and self.connected:
            client.disconnect()
            client.loop(timeout=0.05)
        client.on_disconnect = client.on_publish = client.on_connect = None
        client.on_message = client.on_subscribe = None
        sock = client.socket()
        if sock is not None:
            sock.close()

    # -- paho's callbacks, inside pump ------------------------------------------

    def _connack(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self.lost_reason = f"broker refused the connection: {reason_code}"
            if login_refused(reason_code):
                self.refusal = str(reason_code)
            return
        self.connected = True
        self._subscribed_version = self._subscriptions.version
        self._subscribed_topics = set(self._subscriptions.topics())
        status = [self._status_topic] if self._on_status is not None else []
        self._subscribe(status + sorted(self._subscribed_topics - set(status)))
        self._on_connected(self)

    def _subscribe(self, topics: list[str]) -> None:
        if not topics:
            return
        result, mid = self._client.subscribe([(topic, SUBSCRIBE_QOS) for topic in topics])
        if result == mqtt.MQTT_ERR_SUCCESS and mid is not None:
            self._subscribing[mid] = topics

    def _disconnected(self, client, userdata, flags, reason_code, properties) -> None:
        self.lost_reason = self.lost_reason or f"disconnected: {reason_code}"

    def _message(self, client, userdata, message) -> None:
        if self._on_status is not None and message.topic == self._status_topic:
            self._on_status(message.payload)
        self._subscriptions.deliver(message.topic, message.payload)

    def _subscribed(self, client, userdata, mid, reason_codes, properties) -> None:
        topics = self._subscribing.pop(mid, [])
        for topic, code in zip(topics, reason_codes, strict=False):
            if not getattr(code, "is_failure", False):
                continue
            if self._on_status is not None and topic == self._status_topic:
                log.warning(
                    "MQTT: the broker refused the subscription to this device's own status "
                    "topic '%s' (%s; an ACL?): a stale status there will not be corrected",
                    self._status_topic,
                    code,
                )
            else:
                self._subscriptions.refused(topic, code)

    def _puback(self, client, userdata, mid, reason_code, properties) -> None:
        row_id = self._in_flight.pop(mid, None)
        if row_id is None:
            self._early.add(mid)
            return
        self._acknowledged(row_id, reason_code)

    def _acknowledged(self, row_id: int, reason_code) -> None:
        if getattr(reason_code, "is_failure", False):
            self.rejected += 1
            log.warning("MQTT: the broker rejected a message: %s", reason_code)
        self._acked.append(row_id)
        self.acknowledged += 1
