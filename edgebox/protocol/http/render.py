"""The dataplane's typed results as the JSON documents the HTTP routes send:
KServe v2's metadata and Triton's configuration, statistics and repository
extensions, with the keys in the order Triton writes them. Each function
returns a document for ``json.dumps``; nothing here reads a request.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_statistics.md
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edgebox.dataplane_results import (
    InferBatchStatistics,
    ModelConfig,
    ModelMetadata,
    RepositoryIndexEntry,
    ServerMetadata,
    StatisticDuration,
    TensorMetadata,
    VersionStatistics,
)
from edgebox.repository.config import config_to_dict


def server_metadata(result: ServerMetadata) -> dict[str, Any]:
    return {"name": result.name, "version": result.version, "extensions": list(result.extensions)}


def model_metadata(result: ModelMetadata) -> dict[str, Any]:
    """KServe v2's fields, then ``notes`` only when the backend left some
    (clients ignore keys they do not know)."""
    document: dict[str, Any] = {
        "name": result.name,
        "versions": list(result.versions),
        "platform": result.platform,
        "inputs": [_tensor(t) for t in result.inputs],
        "outputs": [_tensor(t) for t in result.outputs],
    }
    if result.notes:
        document["notes"] = list(result.notes)
    return document


def model_config(config: ModelConfig) -> dict[str, Any]:
    return config_to_dict(config)


def statistics(entries: Iterable[VersionStatistics]) -> dict[str, Any]:
    return {"model_stats": [_version_statistics(e) for e in entries]}


def repository_index(entries: Iterable[RepositoryIndexEntry]) -> list[dict[str, Any]]:
    """A never-loaded folder is its name alone; a model-level status has no
    ``version``; a state always comes with its (maybe empty) reason."""
    index = []
    for entry in entries:
        document: dict[str, Any] = {"name": entry.name}
        if entry.version is not None:
            document["version"] = entry.version
        if entry.state is not None:
            document["state"] = entry.state.value
            document["reason"] = entry.reason
        index.append(document)
    return index


def _tensor(tensor: TensorMetadata) -> dict[str, Any]:
    return {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}


def _version_statistics(entry: VersionStatistics) -> dict[str, Any]:
    counts = entry.counts
    phases = counts.inference_stats
    return {
        "name": entry.name,
        "version": entry.version,
        "last_inference": counts.last_inference_ms,
        "inference_count": counts.inference_count,
        "execution_count": counts.execution_count,
        "inference_stats": {
            "success": _duration(phases.success),
            "fail": _duration(phases.fail),
            "queue": _duration(phases.queue),
            "compute_input": _duration(phases.compute_input),
            "compute_infer": _duration(phases.compute_infer),
            "compute_output": _duration(phases.compute_output),
            "cache_hit": _duration(phases.cache_hit),
            "cache_miss": _duration(phases.cache_miss),
        },
        # Triton 2.51 always sends these two; per-response counts of decoupled
        # models and memory accounting are not kept yet, so they stay empty.
        "response_stats": {},
        "batch_stats": [_batch(b) for b in counts.batch_stats],
        "memory_usage": [],
    }


def _batch(batch: InferBatchStatistics) -> dict[str, Any]:
    return {
        "batch_size": batch.batch_size,
        "compute_input": _duration(batch.compute_input),
        "compute_infer": _duration(batch.compute_infer),
        "compute_output": _duration(batch.compute_output),
    }


def _duration(duration: StatisticDuration) -> dict[str, int]:
    return {"count": duration.count, "ns": duration.ns}
