"""The MQTT thread: bus events -> spool -> broker, acknowledged row by row.

Nobody waits on it. Inference and stream threads only put events on the bus
(a bounded queue per subscriber, oldest dropped and counted); this thread
alone routes them, hands them to the spool (which writes to disk what the
broker does not acknowledge in time), and sends from the spool in row order,
at most ``max_inflight`` unacknowledged. A row leaves the spool only when the
broker acknowledged it (PUBACK for QoS 1), so a link that drops, a broker
that restarts or a daemon stopped mid-send re-sends it, with the same epoch
and ``seq``: delivery is at least once.

The retained status goes first on every connection (it replaces any status
still unsent), then the backlog in order. The thread also listens: the
filters given to ``subscribe`` are subscribed on every connection
(subscriptions.py) and their messages handed to their callbacks. A login the broker refuses is
logged once and retried slowly, any other failure sooner (reconnect.py).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from edgebox.backoff import Backoff
from edgebox.events import EventBus, MqttLinkChanged, SpoolDegraded, SpoolDropped
from edgebox.mqtt.connection import LastWill
from edgebox.mqtt.link_stats import LinkFigures, MqttStats
from edgebox.mqtt.reconnect import (
    RECENTLY_UP_S,
    RECONNECT,
    RECONNECT_AFTER_UP,
    RELOGIN,
    ReconnectSchedule,
)
from edgebox.mqtt.routing import STATUS_CHANGES, Router
from edgebox.mqtt.session import CONNECT_ERRORS, BrokerSession
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.spool import Outgoing, Spool
from edgebox.mqtt.status import DeviceStatus
from edgebox.mqtt.subscriptions import Callback, Subscriptions
from edgebox.mqtt.waker import Waker

log = logging.getLogger("edgebox.mqtt")

LOOP_TIMEOUT_S = 0.05
"""Longest paho's select waits while connected and nothing happens; an event
from the bus ends the wait at once (``Waker``)."""
BUSY_WINDOW_S = 0.01
"""Within this long of the last event the MQTT thread polls every
``POLL_S`` instead of sleeping armed: at hundreds of results a second the
publishers then never pay for a wake-up (edgebox/mqtt/waker.py)."""
POLL_S = 0.002
BATCH = 512
COMMIT_INTERVAL_S = 0.025
"""Events are committed to the spool at most this often (or per ``BATCH``):
one fsync per event would, at a few thousand results a second, take the
cores the requests need."""
STATS_LOG_INTERVAL_S = 60.0
"""How often the link's figures go to the log, when they changed."""
IDLE_WAIT_S = 0.25
"""Longest wait for an event while not connected; bounds how long ``stop`` waits."""


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
        backoff_after_up: Backoff = RECONNECT_AFTER_UP,
        recently_up_s: float = RECENTLY_UP_S,
        connack_timeout_s: float = 10.0,
        stats_log_interval_s: float = STATS_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        subscriptions: Mapping[str, Callback] | None = None,
    ) -> None:
        """``subscriptions``: topic filter -> callback, as ``subscribe``."""
        self._settings = settings
        self._bus = bus
        self._router = router
        self._status = DeviceStatus(identity, serving, clock, wall)
        self._spool_factory = spool_factory or (
            lambda: Spool(
                settings.resolved_spool_path,
                int(settings.spool_max_mb * 1024 * 1024),
                write_delay_s=settings.spool_write_delay_s,
            )
        )
        self._retry = ReconnectSchedule(
            backoff, refused_backoff, backoff_after_up, recently_up_s, clock
        )
        self._connack_timeout_s = connack_timeout_s
        self._clock = clock
        self._wall = wall
        self.broker = f"{settings.parsed_url.host}:{settings.parsed_url.port}"
        self._subscription = bus.subscribe(max_events=settings.queue_events)
        self._waker = Waker()
        self._subscription.set_waker(self._waker.wake)
        self._last_event_at = float("-inf")
        self._stopping = threading.Event()
        self._stop_budget_s = 1.0
        self._thread: threading.Thread | None = None
        self._spool: Spool | None = None
        self._session: BrokerSession | None = None
        self._state = "starting"
        self._refusals_logged: set[str] = set()
        self._pending: list = []
        """Events taken from the bus, not yet committed (see COMMIT_INTERVAL_S)."""
        self._last_commit = float("-inf")
        self._queue_dropped_seen = 0
        self._unreported: dict[str, int] = {}
        """Queue drops not yet told to subscribers (the spool keeps its own)."""
        self._degraded_seen: str | None = None
        self._figures = LinkFigures(self.broker, stats_log_interval_s, clock)
        self._reconfigured: queue.SimpleQueue[tuple[MqttSettings, Router, tuple[str, ...]]] = (
            queue.SimpleQueue()
        )
        """Handed over by ``reconfigure``, taken (the last one) by the MQTT thread."""
        self._file_digests = settings.file_digests()
        """Of the files the connection reads, as last handed to the MQTT thread."""
        self._subscriptions = Subscriptions()
        for topic, callback in (subscriptions or {}).items():
            self._subscriptions.add(topic, callback)

    # -- the daemon's side --------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mqtt", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> bool:
        """Commit what is still on the bus, publish the retained ``offline``
        status (if connected), disconnect cleanly (the broker then drops the
        last will) and end the thread; False if it did not end within
        ``timeout_s``. Unsent rows stay in the spool for the next start."""
        self._stop_budget_s = max(0.0, timeout_s / 2)
        self._stopping.set()
        if self._thread is None:
            self._subscription.close()
            self._waker.close()
            return True
        self._waker.arm()
        self._waker.wake()
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def subscribe(self, topic: str, callback: Callback) -> None:
        """Hand each message matching the filter ``topic`` to ``callback``,
        from now on (any thread; a live connection subscribes within a loop
        step) and again on every connection, QoS 1, so a retained message
        arrives again after each reconnect. ``callback(payload)`` runs on the
        MQTT thread: it must only hand off (enqueue) and return. A filter the
        broker refuses is logged once. Raises ValueError for a filter MQTT
        does not allow."""
        self._subscriptions.add(topic, callback)

    def unsubscribe(self, topic: str) -> None:
        """Stop listening on ``topic`` (a settings reload that moved it)."""
        self._subscriptions.remove(topic)

    def stats(self) -> MqttStats:
        return self._figures.stats

    def reconfigure(self, settings: MqttSettings, router: Router) -> tuple[str, ...]:
        """A settings reload (the daemon's main thread): the MQTT thread
        routes with ``router`` from its next step and, when ``settings``
        differ or a file the connection reads changed (a fixed password in the
        same ``password_file``), drops the connection (the broker publishes
        the last will) and connects at once. The spool and its unsent rows
        stay: they go to the new broker, under the topics they were routed
        to. The spool and the bus queue keep their sizes (those need a
        restart). Returns the fields whose files changed."""
        digests = settings.file_digests()
        changed = tuple(key for key, digest in digests.items() if digest != self._file_digests[key])
        self._file_digests = digests
        self._reconfigured.put((settings, router, changed))
        return changed

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
            self._subscription.set_waker(None)
            self._waker.close()

    def _step(self) -> None:
        if not self._reconfigured.empty():
            self._take_settings()
        session = self._session
        wait = 0.0 if session is not None else self._idle_wait_s()
        if self._pending:
            wait = min(wait, max(0.0, self._last_commit + COMMIT_INTERVAL_S - self._clock()))
        batch = self._subscription.get_batch(BATCH, wait)
        if batch:
            self._last_event_at = self._clock()
        self._pending += batch
        if len(self._pending) >= BATCH or self._clock() - self._last_commit >= COMMIT_INTERVAL_S:
            self._commit_pending()
        if session is None:
            if self._retry.due() and not self._stopping.is_set():
                self._connect()
        else:
            session.sync_subscriptions()
            session.send_window(self._spool)
            self._spool.ack_many(session.pump(self._socket_wait_s(len(batch)), self._waker))
            self._waker.disarm()
            if session.lost_reason is not None:
                self._lose(session.lost_reason)
        self._spool.flush_due()
        self._refresh_stats()

    def _socket_wait_s(self, taken: int) -> float:
        """How long paho's select may wait: not at all after a full batch
        (events may be left queued), until the next commit while events are
        pending, ``POLL_S`` while events flow, else ``LOOP_TIMEOUT_S``, armed
        so that the next event ends the wait."""
        if taken == BATCH:
            return 0.0
        now = self._clock()
        wait_s = LOOP_TIMEOUT_S
        if self._pending:
            wait_s = min(wait_s, max(0.0, self._last_commit + COMMIT_INTERVAL_S - now))
        if now - self._last_event_at < BUSY_WINDOW_S:
            return min(wait_s, POLL_S)
        self._waker.arm()
        return 0.0 if self._subscription.queued else wait_s

    def _take_settings(self) -> None:
        files: set[str] = set()
        while not self._reconfigured.empty():
            settings, self._router, changed = self._reconfigured.get_nowait()
            files.update(changed)
        if settings == self._settings and not files:
            return
        self._settings = settings
        self._status.renamed(settings.resolved_device_id)
        url = settings.parsed_url
        previous, self.broker = self.broker, f"{url.host}:{url.port}"
        what = "settings" if not files else ", ".join(f"'{key}'" for key in sorted(files))
        log.info("MQTT: %s changed; reconnecting (was %s, now %s)", what, previous, self.broker)
        session, self._session = self._session, None
        if session is not None:
            was_connected = session.connected
            self._close_session(session, clean=False)
            if was_connected:
                self._bus.publish(MqttLinkChanged("disconnected", previous, "settings reloaded"))
        self._state = "connecting"
        self._retry.now()
        self._refusals_logged.clear()

    def _idle_wait_s(self) -> float:
        return self._retry.wait_s(IDLE_WAIT_S)

    def _commit_pending(self) -> None:
        events, self._pending = self._pending, []
        self._last_commit = self._clock()
        messages: list[Outgoing] = []
        for event in events:
            if isinstance(event, STATUS_CHANGES):
                self._status.dirty = True
            message = self._router.route(event)
            if message is not None:
                messages.append(message)
        queue_dropped = self._subscription.dropped
        if queue_dropped > self._queue_dropped_seen:
            lost = queue_dropped - self._queue_dropped_seen
            self._figures.count_drops({"queue": lost})
            self._unreported["queue"] = self._unreported.get("queue", 0) + lost
            self._queue_dropped_seen = queue_dropped
        connected = self._session is not None and self._session.connected
        if connected and self._status.due():
            messages.append(self._status_message(online=True))
        if messages:
            for row in self._spool.append(messages):
                if row.topic == self._router.topics.status:
                    self._status.published(row.payload)
        self._check_degraded()

    def _status_message(self, online: bool, reason: str = "") -> Outgoing:
        return self._status.message(self._router.topics.status, self._settings.qos, online, reason)

    def _connect(self) -> None:
        if self._state != "refused":
            # A refused login stays the state shown until a login succeeds.
            self._state = "connecting"
        # The will is reserved a seq of its own: the broker may send it later.
        (will_row,) = self._spool.append([self._status_message(False, "connection lost")])
        self._spool.ack(will_row.row_id)
        will = LastWill(self._router.topics.status, will_row.payload, self._settings.qos)
        session = BrokerSession(
            self._settings,
            will,
            self._connected,
            self._connack_timeout_s,
            self._clock,
            on_status=self._status_seen,
            subscriptions=self._subscriptions,
        )
        self._status.connection_opened()
        try:
            session.open()
        except CONNECT_ERRORS as exc:
            session.close(clean=False)
            self._retry_later(f"cannot connect: {exc}")
            return
        self._session = session

    def _connected(self, session: BrokerSession) -> None:
        """The CONNACK said yes: the retained status first, then the backlog
        (``send_window``), and what was dropped while away."""
        self._retry.up()
        self._state = "connected"
        log.info("MQTT: connected to %s", self.broker)
        self._bus.publish(MqttLinkChanged("connected", self.broker))
        (row,) = self._spool.append([self._status_message(online=True)])
        self._status.published(row.payload)
        session.publish(row)
        drops = self._spool.take_drops()
        for kind, count in self._unreported.items():
            drops[kind] = drops.get(kind, 0) + count
        self._unreported.clear()
        if drops:
            self._bus.publish(SpoolDropped(drops, "spool full or queue overflowed"))

    def _status_seen(self, payload: bytes) -> None:
        """A message on this device's status topic (inside ``pump``)."""
        check = self._status.seen(payload, self._router.topics.status)
        if check.conflict is not None:
            log.error("MQTT: %s", check.conflict)
            self._bus.publish(MqttLinkChanged("conflict", self.broker, check.conflict))

    def _lose(self, reason: str) -> None:
        """The connection is gone (or never came up): what was in flight stays
        in the spool, to be sent again; try again later."""
        session, self._session = self._session, None
        was_connected = session is not None and session.connected
        if session is not None:
            self._close_session(session, clean=False)
            if session.refusal is not None:
                self._refused(session.refusal)
        if was_connected:
            self._retry.lost()
            log.warning("MQTT: lost the connection to %s: %s", self.broker, reason)
            self._bus.publish(MqttLinkChanged("disconnected", self.broker, reason))
        self._retry_later(reason)

    def _close_session(self, session: BrokerSession, clean: bool) -> None:
        session.close(clean)
        self._figures.session_closed(session.sent, session.acknowledged, session.rejected)

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
                self._retry.refused_backoff.initial_s,
                self._retry.refused_backoff.max_s,
            )
            self._bus.publish(MqttLinkChanged("refused", self.broker, reason))

    def _retry_later(self, reason: str) -> None:
        refused = self._state == "refused"
        if not refused:
            self._state = "disconnected"
            if self._retry.attempt == 0:
                log.warning("MQTT: broker %s unreachable (%s); spooling", self.broker, reason)
            else:
                log.debug("MQTT: retry %d failed: %s", self._retry.attempt, reason)
        self._retry.failed(refused)

    def _finish(self) -> None:
        """At shutdown: what is still on the bus committed to the spool, the
        backlog sent for at most half the stop budget (so the events of the
        shutdown itself, queued just before, reach the broker), the retained
        ``offline`` status acknowledged within the rest, then a clean
        DISCONNECT. What is not acknowledged by then stays spooled."""
        self._pending += self._subscription.get_batch(self._settings.queue_events, 0)
        self._subscription.close()
        self._commit_pending()
        session, self._session = self._session, None
        if session is None:
            return
        if session.connected:
            deadline = self._clock() + self._stop_budget_s
            self._drain(session, self._clock() + self._stop_budget_s / 2)
            (row,) = self._spool.append([self._status_message(False, "shutdown")])
            self._status.published(row.payload)
            if session.publish(row):
                while session.in_flight(row.row_id) and self._clock() < deadline:
                    self._spool.ack_many(session.pump(LOOP_TIMEOUT_S))
                    if session.lost_reason is not None:
                        break
            self._spool.ack_many(session.pump(0))
        self._close_session(session, clean=True)

    def _drain(self, session: BrokerSession, deadline: float) -> None:
        """Send and get acknowledged every unsent row, until none is left, the
        link is lost or ``deadline`` passes."""
        while session.lost_reason is None and self._clock() < deadline:
            session.send_window(self._spool)
            self._spool.ack_many(session.pump(LOOP_TIMEOUT_S))
            if not self._spool.pending(1):
                return

    def _check_degraded(self) -> None:
        degraded = self._spool.degraded
        if degraded and degraded != self._degraded_seen:
            self._degraded_seen = degraded
            self._bus.publish(SpoolDegraded(degraded))

    def _refresh_stats(self, force: bool = False) -> None:
        self._figures.refresh(
            self._state, self.broker, self._spool.stats, self._session, self._wall(), force
        )
