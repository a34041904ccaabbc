"""``synthetic:road``: frames of a moving road rendered in-process, so a
newcomer sees lanes flowing with no camera attached."""

from __future__ import annotations

import numpy as np

from edgebox.streams.source_spec import SourceSpec


class SyntheticSource:
    """Never ends and never fails; the capture loop paces it to the stream's
    fps cap (uncapped, it renders as fast as the CPU allows)."""

    def __init__(self, spec: SourceSpec) -> None:
        from edgebox.streams.synthetic_road import SyntheticRoad

        self._road = SyntheticRoad(**spec.options)
        self._image: np.ndarray | None = None

    def grab(self) -> bool:
        self._image = self._road.next_frame().image
        return True

    def retrieve(self) -> np.ndarray | None:
        image, self._image = self._image, None
        return image

    def close(self) -> None:
        self._image = None
