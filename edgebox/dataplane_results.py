"""What the non-infer verbs of the dataplane and of repository control answer,
with no wire format: each transport renders these (HTTP as KServe v2 JSON in
``protocol/http/render.py``, gRPC as ``service_pb2`` messages), so both say
the same thing.

Results are frozen and hold tuples, so a transport may keep or share one
without a copy. ``model_config`` answers with Triton's ``ModelConfig`` message
itself: gRPC sends it as is and HTTP prints it as JSON. Statistics are the
scheduler's snapshots, named after gRPC's ``ModelStatistics`` parts, plus
what Triton lacks: ``StatisticsSnapshot.request_latency``, a
``LatencyHistogram`` over ``LATENCY_BUCKET_BOUNDS_US`` whose ``quantile_us``
gives percentiles within one bucket (25%); no Triton answer carries it.
Spec: https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/required_api.md
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebox.lifecycle.states import ModelState
from edgebox.repository.config import ModelConfig
from edgebox.scheduling.statistics import (
    LATENCY_BUCKET_BOUNDS_US,
    InferBatchStatistics,
    InferStatistics,
    LatencyHistogram,
    StatisticDuration,
    StatisticsSnapshot,
)

__all__ = [
    "LATENCY_BUCKET_BOUNDS_US",
    "InferBatchStatistics",
    "InferStatistics",
    "LatencyHistogram",
    "ModelConfig",
    "ModelMetadata",
    "RepositoryIndexEntry",
    "ServerMetadata",
    "StatisticDuration",
    "StatisticsSnapshot",
    "TensorMetadata",
    "VersionStatistics",
]


@dataclass(frozen=True)
class ServerMetadata:
    name: str
    version: str
    extensions: tuple[str, ...]
    """Exactly the protocol extensions served."""


@dataclass(frozen=True)
class TensorMetadata:
    name: str
    datatype: str
    """KServe v2 wire name (``FP32``, ``BYTES``...)."""
    shape: tuple[int, ...]
    """As clients send it: batch dimension included (-1) for batching models."""


@dataclass(frozen=True)
class ModelMetadata:
    name: str
    versions: tuple[str, ...]
    """Every version now served, ascending."""
    platform: str
    inputs: tuple[TensorMetadata, ...]
    outputs: tuple[TensorMetadata, ...]
    notes: tuple[str, ...] = ()
    """Beyond KServe v2: what the backend found at load (where TensorRT placed
    the layers, ONNX Runtime's provider fallback), so it need not be dug out of
    the log. Transports with no place for them (gRPC) leave them out."""


@dataclass(frozen=True)
class VersionStatistics:
    """One served version's statistics."""

    name: str
    version: str
    counts: StatisticsSnapshot
    response_cache: bool = False
    """The version's config enables ``response_cache`` (whether or not the
    daemon has a cache): Triton exports its ``nv_cache_*_per_model`` series."""


@dataclass(frozen=True)
class RepositoryIndexEntry:
    """One row of the repository index: a version with its state and reason,
    the model's own state (``version`` None) when it failed before any
    version, or only a name for a model folder that was never loaded
    (``state`` None)."""

    name: str
    version: str | None = None
    state: ModelState | None = None
    reason: str = ""
