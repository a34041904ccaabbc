"""The ``streams:`` entries of the daemon's settings (docs/streams.md,
docs/configuration.md).

Unlike ``mqtt`` or ``dashboard``, ``streams`` is a list given whole by one
layer (the YAML file, or ``EDGEBOX_STREAMS`` as YAML text); the loader in
``edgebox/settings/`` reads each entry's fields through ``parse_field`` and
then asks ``entries_problem`` about the list as a whole. A bad ``source`` is
refused here, from its text alone, before any camera is touched.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from edgebox.streams.source_spec import Decode, parse_source

MAX_QUEUE_FRAMES = 64
MAX_IN_FLIGHT = 4
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
STREAM_NAME = _NAME
"""What a stream's name may be; the dashboard's routes refuse anything else."""
_RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "fps": (lambda v: v >= 0, "a number >= 0 (0: no cap)"),
    "queue_frames": (lambda v: 1 <= v <= MAX_QUEUE_FRAMES, f"an integer 1..{MAX_QUEUE_FRAMES}"),
    "in_flight": (lambda v: 1 <= v <= MAX_IN_FLIGHT, f"an integer 1..{MAX_IN_FLIGHT}"),
    "log_interval_s": (lambda v: v > 0, "a number > 0"),
    "results_every_n": (lambda v: v >= 1, "an integer >= 1"),
    "max_results_per_s": (lambda v: v >= 0, "a number >= 0 (0: no cap)"),
}
"""Each numeric stream field: what it accepts, and the words for it."""


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """One entry of ``streams``: frames from ``source`` run through ``model``
    (see docs/streams.md)."""

    name: str
    """Names the stream in the log, its status and results: letters, digits,
    ``_``, ``.`` and ``-`` (it is a level of its MQTT results topic)."""
    source: str
    """A V4L2 device (``/dev/video0`` or an index), a video file, an
    ``rtsp://`` URL, a GStreamer pipeline ending in ``appsink``, or
    ``synthetic:road``."""
    model: str = "lane_pipeline"
    """The model each frame goes to, always its current version; its one
    input must be UINT8 ``[-1,-1,3]`` (a BGR frame)."""
    fps: float = 15.0
    """Most frames per second taken from the source. 0: no cap; a camera's
    every frame is decoded (the queue still drops what the model cannot keep
    up with), a video file or synthetic source is read only as fast as the
    model goes, so every frame is inferred."""
    queue_frames: int = 1
    """Frames waiting for the model; when full the oldest is dropped (and
    counted), so results stay fresh rather than fall behind."""
    log_interval_s: float = 10.0
    """Seconds between the stream's summary lines in the log."""
    in_flight: int = 2
    """Frames inferred at once. With 2, a frame's preprocessing overlaps the
    previous frame's model (an ensemble's steps each have their own
    instances), which matters when the model is a few-millisecond TensorRT
    engine; results are published in frame order either way."""
    results_every_n: int = 1
    """Publish every n-th result over MQTT (1: each one); the others still
    count in the stream's log line."""
    max_results_per_s: float = 0.0
    """Most results published over MQTT per second, on top of
    ``results_every_n``; 0: no cap."""
    decode: str = "auto"
    """An RTSP camera's decoder: ``auto`` (the Orin's where it can run,
    software otherwise, said once), ``hardware`` (the Orin's or none) or
    ``software`` (FFmpeg on the CPU)."""

    ENTRY_KEYS = ("name", "source", "model", "fps")
    """The keys named when an entry is not a mapping."""

    @classmethod
    def parse_field(cls, name: str, raw: Any, coerce: Callable[[Any], Any]) -> Any:
        """The field ``name`` from its raw value; ``coerce`` is the loader's
        reading by the field's type. Ranges are checked here, not in a
        ``problems()``, so a bad value is reported as the value given rather
        than as what it was coerced to. Raises ValueError saying what was
        expected."""
        if name == "name":
            if not isinstance(raw, str) or not _NAME.fullmatch(raw):
                raise ValueError(
                    "expected 1-64 letters, digits, '_', '.' or '-' (starting with a letter "
                    f"or digit), got {raw!r}"
                )
            return raw
        if name == "source":
            parse_source(raw)
            return str(raw).strip()
        if name == "decode":
            words = [d.value for d in Decode]
            if raw not in words:
                raise ValueError(f"expected one of {', '.join(words)}, got {raw!r}")
            return raw
        if name == "model":
            if not isinstance(raw, str) or not raw.strip():
                raise ValueError(f"expected a model name, got {raw!r}")
            return raw.strip()
        accept, expected = _RANGES[name]
        try:
            value = coerce(raw)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise ValueError(f"expected {expected}, got {raw!r}")
        return value

    @staticmethod
    def entries_problem(entries: tuple[StreamSettings, ...]) -> tuple[int, str, str] | None:
        """``(index, field, message)`` for the first entry whose name an
        earlier one took (a name is a stream's MQTT topic level and its
        dashboard address, so two streams may not share one), or whose
        ``decode`` does not fit its source."""
        seen: dict[str, int] = {}
        for index, stream in enumerate(entries):
            try:
                parse_source(stream.source, stream.decode)
            except ValueError as exc:
                return index, "decode", str(exc)
            if stream.name in seen:
                return (
                    index,
                    "name",
                    f"stream name '{stream.name}' is already used by streams[{seen[stream.name]}]",
                )
            seen[stream.name] = index
        return None
