"""The daemon's streams, as one object the composition root starts after
models load and stops before they unload."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from edgebox.backoff import Backoff
from edgebox.dataplane import DataPlane
from edgebox.events import EventBus, StreamStatus
from edgebox.streams.frame_source import FrameSource
from edgebox.streams.health import StreamHealthReport
from edgebox.streams.latest_frames import LatestFrames
from edgebox.streams.settings import StreamSettings
from edgebox.streams.source_spec import SourceKind, SourceSpec
from edgebox.streams.sources import open_source
from edgebox.streams.stream import Stream

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamChanges:
    """What ``StreamManager.apply`` did, by stream name."""

    started: tuple[str, ...] = ()
    stopped: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()

    def describe(self) -> str:
        """``started 'b'; stopped 'a'``, or empty when nothing changed."""
        parts = [
            f"{verb} {', '.join(repr(name) for name in names)}"
            for verb, names in (
                ("started", self.started),
                ("stopped", self.stopped),
                ("restarted", self.restarted),
            )
            if names
        ]
        return "; ".join(parts)


class StreamManager:
    """Owned by the daemon; ``start``, ``apply`` and ``stop`` are called from
    its main thread, ``status`` and ``stream`` from any (the dashboard's
    request threads, the MQTT status document)."""

    def __init__(
        self,
        streams: Sequence[StreamSettings],
        dataplane: DataPlane,
        bus: EventBus,
        *,
        open_source: Callable[[SourceSpec], FrameSource] = open_source,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.latest_frames = LatestFrames()
        """Each stream's latest inferred frame and result (for the dashboard)."""
        self._dataplane = dataplane
        self._bus = bus
        self._open_source = open_source
        self._backoff = backoff
        self._clock = clock
        self._streams = [self._build(config) for config in streams]
        """Replaced whole (never changed in place) by ``apply``, so ``status``
        on another thread reads one list or the other."""
        self._started = False

    def _build(self, config: StreamSettings) -> Stream:
        return Stream(
            config,
            self._dataplane,
            self._bus,
            open_source=self._open_source,
            backoff=self._backoff or Backoff(),
            clock=self._clock,
            latest=self.latest_frames,
        )

    def start(self) -> None:
        """Start every stream's threads; returns at once (sources open on
        their own threads, so a slow camera delays nothing)."""
        if self._started:
            return
        self._started = True
        self._start_streams(self._streams)

    def _start_streams(self, streams: Sequence[Stream]) -> None:
        if any(s.spec.kind is SourceKind.NETWORK for s in streams):
            from edgebox.streams.opencv_source import prefer_low_latency_network_reads

            prefer_low_latency_network_reads()
        for stream in streams:
            log.info(
                "stream '%s': '%s' -> model '%s', %s",
                stream.name,
                stream.spec.display,
                stream.config.model,
                f"at most {stream.config.fps:g} fps" if stream.config.fps else "no fps cap",
            )
            stream.start()

    def apply(self, streams: Sequence[StreamSettings], timeout_s: float) -> StreamChanges:
        """Make the running streams those of ``streams`` (a settings reload,
        on the daemon's main thread): a stream whose settings are unchanged is
        left running with its counters and state; a removed one stops, a
        changed one stops and starts again with fresh counters, an added one
        starts (once ``start`` has run). Stopping waits up to ``timeout_s`` in
        all; a stream stuck in a read is left behind as in ``stop``."""
        running = {stream.name: stream for stream in self._streams}
        wanted = {config.name for config in streams}
        changes = StreamChanges(
            started=tuple(c.name for c in streams if c.name not in running),
            stopped=tuple(name for name in running if name not in wanted),
            restarted=tuple(
                c.name for c in streams if c.name in running and running[c.name].config != c
            ),
        )
        ending = [running[name] for name in (*changes.stopped, *changes.restarted)]
        if self._started and ending:
            deadline = time.monotonic() + timeout_s
            for stream in ending:
                stream.request_stop()
            for stream in ending:
                stream.join(max(0.0, deadline - time.monotonic()))
        for name in changes.stopped:
            self.latest_frames.drop(name)
        fresh = {
            c.name: self._build(c)
            for c in streams
            if c.name in changes.started or c.name in changes.restarted
        }
        self._streams = [fresh.get(c.name) or running[c.name] for c in streams]
        if self._started:
            self._start_streams([s for s in self._streams if s.name in fresh])
        return changes

    def stream(self, name: str) -> Stream | None:
        """The running stream called ``name``, or None."""
        return next((s for s in self._streams if s.name == name), None)

    def stop(self, timeout_s: float) -> bool:
        """Stop all streams within ``timeout_s``; True if every thread ended.
        A capture thread stuck in a read is left behind (it is a daemon
        thread) and releases its source if the read ever returns."""
        if not self._started:
            return True
        deadline = time.monotonic() + timeout_s
        for stream in self._streams:
            stream.request_stop()
        stopped = True
        for stream in self._streams:
            stopped = stream.join(max(0.0, deadline - time.monotonic())) and stopped
        return stopped

    def status(self) -> list[StreamStatus]:
        return [stream.status() for stream in self._streams]

    def health(self) -> list[StreamHealthReport]:
        """Each stream's health (edgebox/streams/health.py), in settings order."""
        return [stream.health() for stream in self._streams]
