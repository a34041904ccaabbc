"""INT8 calibration: preprocessed images, in batches of the engine's input
shapes, copied to the GPU for TensorRT's entropy calibrator.

``CalibrationFeed`` holds the logic (batching, shape checks, device buffers,
the cache) and ``entropy_calibrator`` wraps it in the
``IInt8EntropyCalibrator2`` subclass TensorRT calls during the build. TensorRT
calls ``get_batch`` from C++, where a Python exception cannot travel: the
feed records the first failure, ends calibration, and the command raises it
once ``build_serialized_network`` returns.

The network has an explicit batch dimension, so each batch is the full input
tensor at the calibration profile's shape and ``get_batch_size`` answers 1,
as trtexec's calibrator does (the value is deprecated in TensorRT 10).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from edgebox.engine_build.options import Shape, format_shape
from edgebox.errors import EdgeboxError, InvalidArgument
from edgebox.tensors import numpy_dtype

CALIBRATION_CACHE_FILENAME = "calibration.cache"

Sample = tuple[str, dict[str, np.ndarray]]
"""(where it came from, e.g. the image path; engine input name -> tensor)."""


class CalibrationFeed:
    """Turns samples into calibration batches on the device.

    ``samples`` is consumed lazily, one batch at a time, so a large image
    folder never sits in memory whole. ``cache`` is an earlier calibration's
    result (from ``cache_source``); when given, TensorRT reads it and asks
    for no batches, so ``samples`` may be None. Used on the thread that runs
    the build; not thread-safe.
    """

    def __init__(
        self,
        cuda: ModuleType | Any,
        samples: Iterable[Sample] | None,
        shapes: Mapping[str, Shape],
        datatypes: Mapping[str, str],
        cache: bytes | None = None,
        cache_source: str = "an earlier build",
    ) -> None:
        self._cuda = cuda
        self._samples = iter(samples) if samples is not None else None
        self._cache_source = cache_source
        self._shapes = dict(shapes)
        self._dtypes = {name: numpy_dtype(datatypes[name]) for name in shapes}
        self._cache_in = cache
        self._buffers: dict[str, Any] = {}
        self._primed: dict[str, np.ndarray] | None = None
        self.samples_per_batch: int | None = None
        self.batches_fed = 0
        self.cache_out: bytes | None = None
        self.failure: BaseException | None = None

    def prime(self) -> None:
        """Build the first batch now, so a preprocessing or shape problem is
        reported before a build that may take minutes."""
        if self._primed is None:
            self._primed = self._next_batch()
            if self._primed is None:
                if self.samples_per_batch is None:
                    raise InvalidArgument("calibration: no samples to calibrate with")
                raise InvalidArgument(
                    f"calibration: fewer samples than one batch of {self.samples_per_batch} "
                    "(the batch size in --opt-shapes); add images or lower the batch"
                )

    def next_pointers(self, names: list[str]) -> list[int] | None:
        """Device pointers for one batch in the order of ``names``; None when
        the samples are used up or a failure was recorded."""
        if self.failure is not None:
            return None
        try:
            batch = self._primed if self._primed is not None else self._next_batch()
            self._primed = None
            if batch is None:
                return None
            pointers = []
            for name in names:
                if name not in batch:
                    raise EdgeboxError(
                        f"calibration: TensorRT asked for input '{name}', which the feed "
                        f"does not have (it has {', '.join(sorted(batch))})"
                    )
                pointers.append(self._copy_to_device(name, batch[name]))
            self.batches_fed += 1
            return pointers
        except BaseException as exc:  # see the module docstring
            self.failure = exc
            return None

    def read_cache(self) -> bytes | None:
        return self._cache_in

    def write_cache(self, data: Any) -> None:
        self.cache_out = bytes(data)

    def close(self) -> None:
        """Free the device buffers; call inside the CUDA context they were made in."""
        for allocation in self._buffers.values():
            allocation.free()
        self._buffers.clear()

    def _next_batch(self) -> dict[str, np.ndarray] | None:
        if self._samples is None:
            raise EdgeboxError(
                f"calibration: TensorRT did not accept the calibration cache of "
                f"{self._cache_source} and asked for images; run again with --recalibrate"
            )
        parts: dict[str, list[np.ndarray]] = {name: [] for name in self._shapes}
        taken = 0
        while self.samples_per_batch is None or taken < self.samples_per_batch:
            sample = next(self._samples, None)
            if sample is None:
                return None
            source, tensors = sample
            per_batch = self._check_sample(source, tensors)
            if self.samples_per_batch is None:
                self.samples_per_batch = per_batch
            for name in self._shapes:
                parts[name].append(tensors[name])
            taken += 1
        return {name: self._join(name, arrays) for name, arrays in parts.items()}

    def _check_sample(self, source: str, tensors: Mapping[str, np.ndarray]) -> int:
        """How many samples make one batch, from how each tensor's shape
        relates to the batch shape; raises naming the sample on a mismatch."""
        counts = set()
        for name, shape in self._shapes.items():
            array = tensors.get(name)
            if array is None:
                raise InvalidArgument(
                    f"calibration sample '{source}': no tensor for input '{name}'"
                )
            if array.dtype != self._dtypes[name]:
                raise InvalidArgument(
                    f"calibration sample '{source}', input '{name}': expected dtype "
                    f"{self._dtypes[name]}, got {array.dtype}"
                )
            if array.shape == shape:
                counts.add(1)
            elif shape and array.shape in ((1, *shape[1:]), shape[1:]):
                counts.add(shape[0])
            else:
                raise InvalidArgument(
                    f"calibration sample '{source}', input '{name}': shape "
                    f"{format_shape(array.shape)} does not fit the calibration batch shape "
                    f"{format_shape(shape)}"
                )
        if len(counts) != 1:
            raise InvalidArgument(
                f"calibration sample '{source}': the inputs disagree on the batch size"
            )
        return counts.pop()

    def _join(self, name: str, arrays: list[np.ndarray]) -> np.ndarray:
        shape = self._shapes[name]
        if len(arrays) == 1 and arrays[0].shape == shape:
            return np.ascontiguousarray(arrays[0])
        if arrays[0].shape == shape[1:]:
            return np.ascontiguousarray(np.stack(arrays))
        return np.ascontiguousarray(np.concatenate(arrays, axis=0))

    def _copy_to_device(self, name: str, array: np.ndarray) -> int:
        allocation = self._buffers.get(name)
        if allocation is None:
            allocation = self._cuda.mem_alloc(array.nbytes)
            self._buffers[name] = allocation
        self._cuda.memcpy_htod(allocation, array)
        return int(allocation)


def entropy_calibrator(tensorrt: ModuleType | Any, feed: CalibrationFeed) -> Any:
    """An ``IInt8EntropyCalibrator2`` (the calibrator DLA requires) that asks
    ``feed`` for everything. The class derives from the given module's base,
    so the module stays a parameter."""

    class EntropyCalibrator(tensorrt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            # pybind11 trampolines need the base initialised explicitly.
            tensorrt.IInt8EntropyCalibrator2.__init__(self)

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names: list[str], *_: Any) -> list[int] | None:
            return feed.next_pointers(list(names))

        def read_calibration_cache(self, *_: Any) -> bytes | None:
            return feed.read_cache()

        def write_calibration_cache(self, cache: Any, *_: Any) -> None:
            try:
                feed.write_cache(cache)
            except BaseException as exc:  # see the module docstring
                feed.failure = exc

    return EntropyCalibrator()
