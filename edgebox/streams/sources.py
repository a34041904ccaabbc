"""One interface over every kind of frame source, so the capture loop never
knows whether frames come from a camera, a file, RTSP or the synthetic road.

Each kind lives in its own module; ``open_source`` picks one from the
source's spec. OpenCV is imported only when an OpenCV-backed source opens, so
a daemon without streams runs without it.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from edgebox.streams.source_spec import SourceKind, SourceSpec


class SourceError(Exception):
    """A source could not be opened or stopped working; the message is the
    reason shown in the stream's status, so it says what to check."""


class FrameSource(Protocol):
    """Owned by one stream's capture thread, which alone calls these."""

    def grab(self) -> bool:
        """Wait for the next frame without decoding it; False when the source
        has ended or failed. Live sources are grabbed at their own pace and
        only the frames the fps cap keeps are retrieved."""

    def retrieve(self) -> np.ndarray | None:
        """The grabbed frame as an (H, W, 3) uint8 BGR array (a new array
        each time), or None if it cannot be decoded."""

    def close(self) -> None:
        """Release the device, file or connection; safe to call twice."""


def open_source(spec: SourceSpec) -> FrameSource:
    """An opened source; raises SourceError with the reason when it cannot be."""
    if spec.kind is SourceKind.SYNTHETIC:
        from edgebox.streams.synthetic_source import SyntheticSource

        return SyntheticSource(spec)
    from edgebox.streams.opencv_source import OpenCvSource

    return OpenCvSource(spec)
