"""What the capture loop asks of a frame source, whatever its kind: the
interface every source module (``opencv_source``, ``synthetic_source``)
implements, and the error each raises when it cannot deliver. It imports no
source, so a source module can import it without reaching the others."""

from __future__ import annotations

from typing import Protocol

import numpy as np


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
