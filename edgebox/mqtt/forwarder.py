"""The MQTT thread: bus events -> spool -> broker, acknowledged row by row.

Nobody waits on it. Inference and stream threads only put events on the bus
(a bounded queue per subscriber, oldest dropped and counted); this thread
alone routes them, commits them to the spool (durable before anything else
happens to them), and sends from the spool in row order, at most
``max_inflight`` unacknowledged. A row is deleted only when the broker
acknowledged it (PUBACK for QoS 1), so a link that drops, a broker that
restarts or a daemon killed mid-send re-sends it, with the same ``seq``:
delivery is at least once.

The retained status goes first on every connection (it replaces any status
still unsent), then the backlog in order. A login the broker refuses is
logged once and retried slowly; any other failure is retried with capped
exponential backoff and jitter, so a fleet whose broker comes back does not
reconnect in one burst.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as mqtt

from edgebox.backoff import Backoff
from edgebox.events import EventBus, MqttLinkChanged, SpoolDegraded, SpoolDropped
from edgebox.mqtt import status
from edgebox.mqtt.connection import LastWill, login_refused, new_client, open_connection
from edgebox.mqtt.routing import STATUS_CHANGES, Router
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.spool import Outgoing, Spool

log = logging.getLogger("edgebox.mqtt")

LOOP_TIMEOUT_S = 0.05
"""Longest an event waits on the thread while connected (paho's select)."""
STATUS_MIN_INTERVAL_S = 1.0
"""A burst of model or stream changes refreshes the status once."""
BATCH = 512
COMMIT_INTERVAL_S = 0.025
"""Events are committed to the spool at most this often (or per ``BATCH``):
one fsync per event would, at a few thousand results a second, take the
cores the requests need."""
STATS_LOG_INTERVAL_S = 60.0
"""How often the link's figures go to the log, when they changed."""
IDLE_WAIT_S = 0.25
"""Longest wait for an event while not connected; bounds how long ``stop`` waits."""
RECONNECT = Backoff(initial_s=1.0, max_s=60.0)
RELOGIN = Backoff(initial_s=30.0, max_s=600.0)
"""After a refused login: credentials are fixed by a person, not by retrying."""


@dataclass(frozen=True)
class MqttStats:
    """What the log, the dashboard and Prometheus show about the link."""

    state: str
    """starting, connecting, connected, disconnected, refused or stopped."""
    broker: str
    spool_rows: int = 0
    spool_bytes: int = 0
    oldest_unsent_age_s: float | None = None
    sent: int = 0
    acknowledged: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    """Per kind since start: spool cap (result, telemetry, event, status),
    ``queue`` (the bus queue overflowed), ``rejected`` (the broker refused it)."""
    degraded: str | None = None


class MqttForwarder:
    def __init__(
        self,
        settings: MqttSettings,
        bus: EventBus,
        router: Router,
        identity: dict[str, Any],
        serving: Callable[[], dict[str, Any]],
        spool_factory: Callable[[], Spool] | None = None,
        backoff: Backoff = RECONNECT,
        refused_backoff: Backoff = RELOGIN,
        connack_timeout_s: float = 10.0,
        stats_log_interval_s: float = STATS_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._bus = bus
        self._router = router
        self._identity = identity
        self._serving = serving
        self._spool_factory = spool_factory or (
            lambda: Spool(settings.resolved_spool_path, int(settings.spool_max_mb * 1024 * 1024))
        )
        self._backoff = backoff
        self._refused_backoff = refused_backoff
        self._connack_timeout_s = connack_timeout_s
        self._stats_log_interval_s = stats_log_interval_s
        self._clock = clock
        self._wall = wall
        self.broker = f"{settings.parsed_url.host}:{settings.parsed_url.port}"
        self._subscription = bus.subscribe(max_events=settings.queue_events)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._stats = MqttStats("starting", self.broker)
        self._spool: Spool | None = None
        self._client: mqtt.Client | None = None
        self._connected = False
        self._lost_reason: str | None = None
        self._connack_deadline = 0.0
        self._next_attempt = 0.0
        self._attempt = 0
        self._refusals_logged: set[str] = set()
        self._in_flight: dict[int, int] = {}
        """paho message id -> spool row id."""
        self._early_acks: set[int] = set()
        self._acked: list[int] = []
        """Rows acknowledged during ``loop``, deleted together after it."""
        self._cursor = 0
        """Highest row sent in order on this connection: the next rows are above it."""
        self._status_dirty = False
        self._last_status = float("-inf")
        self._queue_dropped_seen = 0
        self._unreported: dict[str, int] = {}
        """Queue drops not yet told to subscribers (the spool keeps its own)."""
        self._stop_budget_s = 1.0
        self._pending: list = []
        """Events taken from the bus, not yet committed (see COMMIT_INTERVAL_S)."""
        self._last_commit = float("-inf")
        self._degraded_seen: str | None = None
        self._counts = {"sent": 0, "acknowledged": 0}
        self._dropped: dict[str, int] = {}
        self._state = "starting"
        self._last_stats = float("-inf")
        self._last_stats_log = clock()
        self._logged_figures: tuple = ()

    # -- the daemon's side --------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mqtt", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> bool:
        """Publish the retained ``offline`` status (if connected), disconnect
        cleanly (the broker then drops the last will) and end the thread;
        False if it did not end within ``timeout_s``. Unsent rows stay in the
        spool for the next start."""
        self._stop_budget_s = max(0.0, timeout_s / 2)
        self._stopping.set()
        if self._thread is None:
            self._subscription.close()
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stats(self) -> MqttStats:
        return self._stats

    # -- the MQTT thread ----------------------------------------------------------

    def _run(self) -> None:
        self._spool = self._spool_factory()
        try:
            while not self._stopping.is_set():
                try:
                    self._step()
                except Exception:
                    log.exception("MQTT: unexpected failure; reconnecting")
                    self._lose("internal error")
            self._finish()
        finally:
            self._state = "stopped"
            self._refresh_stats(force=True)
            self._spool.close()

    def _step(self) -> None:
        wait = 0.0 if self._client is not None else self._idle_wait_s()
        if self._pending:
            wait = min(wait, max(0.0, self._last_commit + COMMIT_INTERVAL_S - self._clock()))
        self._pending += self._subscription.get_batch(BATCH, wait)
        if len(self._pending) >= BATCH or self._clock() - self._last_commit >= COMMIT_INTERVAL_S:
            self._commit_pending()
        if self._client is None:
            if self._clock() >= self._next_attempt and not self._stopping.is_set():
                self._connect()
        elif self._connected:
            self._send_window()
        elif self._clock() > self._connack_deadline:
            self._lose(f"no answer to CONNECT within {self._connack_timeout_s:g} s")
        if self._client is not None:
            result = self._client.loop(timeout=LOOP_TIMEOUT_S)
            self._flush_acks()
            if self._lost_reason is not None or result != mqtt.MQTT_ERR_SUCCESS:
                self._lose(self._lost_reason or mqtt.error_string(result))
        self._refresh_stats()

    def _idle_wait_s(self) -> float:
        return min(IDLE_WAIT_S, max(0.0, self._next_attempt - self._clock()))

    def _flush_acks(self) -> None:
        acked, self._acked = self._acked, []
        self._spool.ack_many(acked)

    def _commit_pending(self) -> None:
        events, self._pending = self._pending, []
        self._last_commit = self._clock()
        self._intake(events)

    def _intake(self, events: list) -> None:
        messages: list[Outgoing] = []
        for event in events:
            if isinstance(event, STATUS_CHANGES):
                self._status_dirty = True
            message = self._router.route(event)
            if message is not None:
                messages.append(message)
        queue_dropped = self._subscription.dropped
        if queue_dropped > self._queue_dropped_seen:
            lost = queue_dropped - self._queue_dropped_seen
            self._count_drops({"queue": lost})
            self._unreported["queue"] = self._unreported.get("queue", 0) + lost
            self._queue_dropped_seen = queue_dropped
        if (
            self._connected
            and self._status_dirty
            and self._clock() - self._last_status >= STATUS_MIN_INTERVAL_S
        ):
            messages.append(self._status_message(online=True))
        if messages:
            self._spool.append(messages)
        self._check_degraded()

    def _status_message(self, online: bool, reason: str = "") -> Outgoing:
        now = self._wall()
        if online:
            self._status_dirty = False
            self._last_status = self._clock()
            document = status.online(self._identity, self._serving(), now)
        else:
            document = status.offline(self._identity, reason, now)
        return Outgoing(
            topic=self._router.topics.status,
            document=document,
            kind="status",
            qos=self._settings.qos,
            retain=True,
            replaces_unsent=True,
        )

    def _connect(self) -> None:
        self._state = "connecting"
        # The will is reserved a seq of its own: the broker may send it later.
        (will_row,) = self._spool.append([self._status_message(False, "connection lost")])
        self._spool.ack(will_row.row_id)
        will = LastWill(self._router.topics.status, will_row.payload, self._settings.qos)
        client = new_client(self._settings, will)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        try:
            open_connection(client, self._settings)
        except (OSError, ValueError, mqtt.WebsocketConnectionError) as exc:
            self._retry_later(f"cannot connect: {exc}")
            return
        self._client = client
        self._lost_reason = None
        self._connack_deadline = self._clock() + self._connack_timeout_s

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._lost_reason = f"broker refused the connection: {reason_code}"
            if login_refused(reason_code):
                self._refused(str(reason_code))
            return
        self._connected = True
        self._cursor = 0
        self._attempt = 0
        self._state = "connected"
        log.info("MQTT: connected to %s", self.broker)
        self._bus.publish(MqttLinkChanged("connected", self.broker))
        (row,) = self._spool.append([self._status_message(online=True)])
        self._publish(row)
        drops = self._spool.take_drops()
        for kind, count in self._unreported.items():
            drops[kind] = drops.get(kind, 0) + count
        self._unreported.clear()
        if drops:
            self._bus.publish(SpoolDropped(drops, "spool full or queue overflowed"))

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self._lost_reason = self._lost_reason or f"disconnected: {reason_code}"

    def _on_publish(self, client, userdata, mid, reason_code, properties) -> None:
        row_id = self._in_flight.pop(mid, None)
        if row_id is None:
            self._early_acks.add(mid)
            return
        self._acknowledged(row_id, reason_code)

    def _acknowledged(self, row_id: int, reason_code) -> None:
        if getattr(reason_code, "is_failure", False):
            self._count_drops({"rejected": 1})
            log.warning("MQTT: the broker rejected a message: %s", reason_code)
        self._acked.append(row_id)
        self._counts["acknowledged"] += 1

    def _send_window(self) -> None:
        room = self._settings.max_inflight - len(self._in_flight)
        if room <= 0:
            return
        sent = set(self._in_flight.values())
        for row in self._spool.pending(room + 1, after_row_id=self._cursor):
            if row.row_id in sent:
                continue
            if not self._publish(row):
                return
            self._cursor = row.row_id
            room -= 1
            if room == 0:
                return

    def _publish(self, row) -> bool:
        info = self._client.publish(row.topic, row.payload, qos=row.qos, retain=row.retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            self._lost_reason = f"publish failed: {mqtt.error_string(info.rc)}"
            return False
        self._counts["sent"] += 1
        if info.mid in self._early_acks:
            self._early_acks.discard(info.mid)
            self._acknowledged(row.row_id, None)
        else:
            self._in_flight[info.mid] = row.row_id
        return True

    def _refused(self, reason: str) -> None:
        self._state = "refused"
        if reason not in self._refusals_logged:
            self._refusals_logged.add(reason)
            who = f" for user '{self._settings.username}'" if self._settings.username else ""
            log.error(
                "MQTT: broker %s refused the login%s: %s; retrying slowly (every %g-%g s)",
                self.broker,
                who,
                reason,
                self._refused_backoff.initial_s,
                self._refused_backoff.max_s,
            )
            self._bus.publish(MqttLinkChanged("refused", self.broker, reason))

    def _lose(self, reason: str) -> None:
        """The connection is gone (or never came up): forget what was in
        flight (those rows stay in the spool) and try again later."""
        was_connected = self._connected
        client, self._client = self._client, None
        self._connected = False
        self._in_flight.clear()
        self._early_acks.clear()
        if client is not None:
            client.on_disconnect = client.on_publish = client.on_connect = None
            sock = client.socket()
            if sock is not None:
                sock.close()
        if was_connected:
            log.warning("MQTT: lost the connection to %s: %s", self.broker, reason)
            self._bus.publish(MqttLinkChanged("disconnected", self.broker, reason))
        self._retry_later(reason)

    def _retry_later(self, reason: str) -> None:
        refused = self._state == "refused"
        policy = self._refused_backoff if refused else self._backoff
        delay = policy.delay_s(self._attempt) * (0.5 + 0.5 * random.random())
        if not refused:
            self._state = "disconnected"
            if self._attempt == 0:
                log.warning("MQTT: broker %s unreachable (%s); spooling", self.broker, reason)
            else:
                log.debug("MQTT: retry %d failed: %s", self._attempt, reason)
        self._attempt += 1
        self._next_attempt = self._clock() + delay

    def _finish(self) -> None:
        """At shutdown: what is still on the bus committed to the spool, the
        retained ``offline`` status acknowledged within the stop budget, then
        a clean DISCONNECT."""
        self._pending += self._subscription.get_batch(self._settings.queue_events, 0)
        self._subscription.close()
        self._commit_pending()
        if self._client is None or not self._connected:
            return
        (row,) = self._spool.append([self._status_message(False, "shutdown")])
        deadline = self._clock() + self._stop_budget_s
        if self._publish(row):
            while row.row_id in self._in_flight.values() and self._clock() < deadline:
                if self._client.loop(timeout=LOOP_TIMEOUT_S) != mqtt.MQTT_ERR_SUCCESS:
                    break
        self._flush_acks()
        self._client.disconnect()
        self._client.loop(timeout=LOOP_TIMEOUT_S)

    def _count_drops(self, drops: dict[str, int]) -> None:
        for kind, count in drops.items():
            self._dropped[kind] = self._dropped.get(kind, 0) + count

    def _check_degraded(self) -> None:
        degraded = self._spool.degraded
        if degraded and degraded != self._degraded_seen:
            self._degraded_seen = degraded
            self._bus.publish(SpoolDegraded(degraded))

    def _refresh_stats(self, force: bool = False) -> None:
        now = self._clock()
        if not force and now - self._last_stats < 0.5:
            return
        self._last_stats = now
        spool = self._spool.stats()
        oldest = spool.oldest_created_at
        self._stats = MqttStats(
            state=self._state,
            broker=self.broker,
            spool_rows=spool.rows,
            spool_bytes=spool.bytes,
            oldest_unsent_age_s=None if oldest is None else max(0.0, self._wall() - oldest),
            sent=self._counts["sent"],
            acknowledged=self._counts["acknowledged"],
            dropped={**spool.dropped, **self._dropped},
            degraded=spool.degraded,
        )
        if now - self._last_stats_log >= self._stats_log_interval_s:
            self._last_stats_log = now
            self._log_stats(self._stats)

    def _log_stats(self, stats: MqttStats) -> None:
        figures = (stats.state, stats.sent, stats.spool_rows, tuple(stats.dropped.items()))
        if figures == self._logged_figures:
            return
        self._logged_figures = figures
        oldest = (
            f", oldest unsent {stats.oldest_unsent_age_s:.0f} s"
            if stats.oldest_unsent_age_s is not None
            else ""
        )
        log.info(
            "MQTT: %s (%s); sent %d, acknowledged %d; spool %d messages, %.1f MB%s; dropped %s%s",
            stats.state,
            stats.broker,
            stats.sent,
            stats.acknowledged,
            stats.spool_rows,
            stats.spool_bytes / 1e6,
            oldest,
            stats.dropped or "none",
            f"; memory only: {stats.degraded}" if stats.degraded else "",
        )
