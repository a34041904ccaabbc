"""Each configured stream's source opened as the daemon opens it and one
frame read from it, against a deadline: a camera that is unreachable, a
wrong password or a file that does not decode is found on the day the box
is installed, not in the journal a week later."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from edgebox.secrets_mask import mask_secrets
from edgebox.selftest.report import Check, Status
from edgebox.streams.frame_source import FrameSource, SourceError
from edgebox.streams.hardware_decode import DECODED_AS_IS, choose, default_probe
from edgebox.streams.opencv_source import generated_pipeline
from edgebox.streams.settings import StreamSettings
from edgebox.streams.source_spec import SourceSpec, parse_source
from edgebox.streams.sources import open_source

SECTION = "cameras"
FRAME_TIMEOUT_S = 20.0
"""Longer than OpenCV's own network open (10 s) and read (5 s) timeouts, so
its message, not this one, names a camera that does not answer."""

Opener = Callable[[SourceSpec], FrameSource]


def camera_checks(
    streams: Sequence[StreamSettings],
    opener: Opener = open_source,
    timeout_s: float = FRAME_TIMEOUT_S,
) -> list[Check]:
    if not streams:
        return [Check(SECTION, "streams", Status.SKIPPED, "no streams: in the settings")]
    return [_one(stream, opener, timeout_s) for stream in streams]


def _one(stream: StreamSettings, opener: Opener, timeout_s: float) -> Check:
    spec = parse_source(stream.source, stream.decode)
    facts = {"source": spec.display, "kind": spec.kind.value}
    outcome: list = []
    done = threading.Event()

    def read() -> None:
        try:
            outcome.append(_first_frame(opener, spec))
        except SourceError as error:
            outcome.append(error)
        except Exception as error:  # whatever the library raised is the finding
            outcome.append(SourceError(f"{type(error).__name__}: {error}"))
        finally:
            done.set()

    # A daemon thread: a capture stuck in a library call is left behind.
    threading.Thread(target=read, name=f"selftest-{stream.name}", daemon=True).start()
    if not done.wait(timeout_s):
        return Check(
            SECTION, stream.name, Status.FAIL, f"{spec.display}: no frame in {timeout_s:g} s", facts
        )
    result = outcome[0]
    if isinstance(result, SourceError):
        detail = f"{spec.display}: {result}"
        pipeline = _pipeline_to_try(spec)
        if pipeline:
            facts["pipeline"] = pipeline
            detail += f"; try: gst-launch-1.0 {pipeline}"
        return Check(SECTION, stream.name, Status.FAIL, detail, facts)
    frame, decoder = result
    height, width = frame.shape[:2]
    facts.update(width=width, height=height, decoder=decoder)
    detail = f"{spec.display}: a {width}x{height} frame, {decoder}"
    return Check(SECTION, stream.name, Status.PASS, detail, facts)


def _pipeline_to_try(spec: SourceSpec) -> str:
    """The generated pipeline, ending in a fakesink, for a source that opens
    through one here (a CSI camera, an RTSP camera the Orin decodes): a
    technician's next step is running it by hand to see which element fails."""
    if not choose(spec, default_probe()).pipeline:
        return ""
    head, _, _ = generated_pipeline(spec).rpartition(" ! appsink")
    return mask_secrets(f"{head} ! fakesink")


def _first_frame(opener: Opener, spec: SourceSpec) -> tuple[np.ndarray, str]:
    """The frame, and who decoded it: a source that generated a pipeline says
    which (``decoder``), the others are what their kind is."""
    source = opener(spec)
    decoder = getattr(source, "decoder", DECODED_AS_IS[spec.kind])
    try:
        if not source.grab():
            raise SourceError("opened, but no frame came")
        frame = source.retrieve()
        if frame is None:
            raise SourceError("a frame came but did not decode")
        return frame, decoder
    finally:
        source.close()
