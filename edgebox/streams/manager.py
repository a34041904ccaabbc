"""The daemon's streams, as one object the composition root starts after
models load and stops before they unload."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from edgebox.backoff import Backoff
from edgebox.dataplane import DataPlane
from edgebox.events import EventBus, StreamStatus
from edgebox.settings import StreamSettings
from edgebox.streams.latest_frames import LatestFrames
from edgebox.streams.source_spec import SourceKind, SourceSpec
from edgebox.streams.sources import FrameSource, open_source
from edgebox.streams.stream import Stream

log = logging.getLogger(__name__)


class StreamManager:
    """Owned by the daemon; ``start`` and ``stop`` are called from its main
    thread, ``status`` from any (the dashboard's HTTP endpoint, later)."""

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
        self._streams = [
            Stream(
                config,
                dataplane,
                bus,
                open_source=open_source,
                backoff=backoff or Backoff(),
                clock=clock,
                latest=self.latest_frames,
            )
            for config in streams
        ]
        self._started = False

    def start(self) -> None:
        """Start every stream's threads; returns at once (sources open on
        their own threads, so a slow camera delays nothing)."""
        if self._started or not self._streams:
            return
        self._started = True
        if any(s.spec.kind is SourceKind.NETWORK for s in self._streams):
            from edgebox.streams.opencv_source import prefer_low_latency_network_reads

            prefer_low_latency_network_reads()
        for stream in self._streams:
            log.info(
                "stream '%s': '%s' -> model '%s', %s",
                stream.name,
                stream.spec.display,
                stream.config.model,
                f"at most {stream.config.fps:g} fps" if stream.config.fps else "no fps cap",
            )
            stream.start()

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

    def __len__(self) -> int:
        return len(self._streams)
