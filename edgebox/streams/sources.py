"""Which source a stream's spec gets, so the capture loop never knows whether
frames come from a camera, a file, RTSP or the synthetic road.

Each kind lives in its own module behind ``FrameSource`` (frame_source.py).
They are imported only when a source of their kind opens, so a daemon
without streams runs without OpenCV.
"""

from __future__ import annotations

from edgebox.streams.frame_source import FrameSource
from edgebox.streams.source_spec import SourceKind, SourceSpec


def open_source(spec: SourceSpec) -> FrameSource:
    """An opened source; raises SourceError with the reason when it cannot be."""
    if spec.kind is SourceKind.SYNTHETIC:
        from edgebox.streams.synthetic_source import SyntheticSource

        return SyntheticSource(spec)
    from edgebox.streams.opencv_source import OpenCvSource

    return OpenCvSource(spec)
