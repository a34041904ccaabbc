"""The models page's document: every model with its versions (state, reason,
device, load notes), its request statistics and its rollout resource, from
what the registry, the statistics counters and the rollouts already hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tritonclient.grpc import model_config_pb2

from edgebox.dataplane_results import LatencyHistogram, StatisticDuration
from edgebox.errors import EdgeboxError

if TYPE_CHECKING:
    from edgebox.dataplane import DataPlane
    from edgebox.lifecycle.registry import ModelRegistry
    from edgebox.repository_control import RepositoryControl

_Group = model_config_pb2.ModelInstanceGroup


def models_document(
    dataplane: DataPlane,
    repository_control: RepositoryControl,
    registry: ModelRegistry,
    control_mode: str,
    last_error: Callable[[str], str | None],
) -> dict[str, Any]:
    entries: dict[str, list] = {}
    for entry in repository_control.repository_index():
        entries.setdefault(entry.name, []).append(entry)
    statistics: dict[str, list] = {}
    for version_stats in dataplane.statistics():
        statistics.setdefault(version_stats.name, []).append(version_stats.counts)
    models = []
    for name, rows in entries.items():
        served = registry.served_versions(name)
        versions = []
        platform = None
        for row in rows:
            if row.state is None:
                continue
            version = served.get(int(row.version)) if row.version is not None else None
            config = version.config if version is not None else None
            if config is not None and platform is None:
                platform = config.platform or config.backend or None
            versions.append(
                {
                    "version": row.version,
                    "state": row.state.value,
                    "reason": row.reason,
                    "device": describe_device(config) if config is not None else None,
                    "notes": list(version.notes) if version is not None else [],
                }
            )
        models.append(
            {
                "name": name,
                "platform": platform,
                "versions": versions,
                "stats": summed_statistics(statistics.get(name, [])),
                "last_error": last_error(name),
                "rollout": _rollout_of(repository_control, name),
                "used_by": repository_control.served_dependents(name),
            }
        )
    return {"control_mode": control_mode, "models": models}


def _rollout_of(repository_control: RepositoryControl, name: str) -> dict[str, Any] | None:
    """The model's rollout resource (one poll of the page shows every
    model's); None for a model that went away since the index was read."""
    try:
        return repository_control.rollout_status(name)
    except EdgeboxError:
        return None


def describe_device(config: Any) -> str:
    """Where a version's instances run, from its ``instance_group``: "GPU 0",
    "2 x CPU", "DLA core 1"; "ensemble" for an ensemble (its steps run on
    their own models) and "auto" where the backend picks (KIND_AUTO, or no
    instance group)."""
    if config.platform == "ensemble":
        return "ensemble"
    parts = []
    for group in config.instance_group:
        dla = [
            str(device.device_id)
            for device in group.secondary_devices
            if _Group.SecondaryDevice.SecondaryDeviceKind.Name(device.kind) == "KIND_NVDLA"
        ]
        kind = _Group.Kind.Name(group.kind).removeprefix("KIND_")
        if dla:
            where = f"DLA core {', '.join(dla)}"
        elif kind == "GPU" and group.gpus:
            where = f"GPU {', '.join(str(gpu) for gpu in group.gpus)}"
        else:
            where = "auto" if kind == "AUTO" else kind
        count = group.count or 1
        parts.append(f"{count} x {where}" if count > 1 else where)
    return ", ".join(parts) or "auto"


def summed_statistics(snapshots: list) -> dict[str, Any]:
    """Triton's statistics summed over a model's served versions; means are
    total time over count in microseconds, None before the first request, as
    are p50/p99 (from the summed latency histograms: within 25%)."""
    success = _sum(s.inference_stats.success for s in snapshots)
    fail = _sum(s.inference_stats.fail for s in snapshots)
    queue = _sum(s.inference_stats.queue for s in snapshots)
    infer = _sum(s.inference_stats.compute_infer for s in snapshots)
    latency = LatencyHistogram.combined(s.request_latency for s in snapshots)
    batches: dict[int, int] = {}
    for snapshot in snapshots:
        for batch in snapshot.batch_stats:
            batches[batch.batch_size] = batches.get(batch.batch_size, 0) + batch.compute_infer.count
    return {
        "requests_success": success.count,
        "requests_failure": fail.count,
        "inference_count": sum(s.inference_count for s in snapshots),
        "execution_count": sum(s.execution_count for s in snapshots),
        "mean_request_us": _mean_us(success),
        "mean_queue_us": _mean_us(queue),
        "mean_compute_infer_us": _mean_us(infer),
        "p50_us": _rounded(latency.quantile_us(0.5)),
        "p99_us": _rounded(latency.quantile_us(0.99)),
        "batch_sizes": [
            {"batch_size": size, "executions": count} for size, count in sorted(batches.items())
        ],
        "last_inference_ms": max((s.last_inference_ms for s in snapshots), default=0),
    }


def _sum(durations) -> StatisticDuration:
    count = ns = 0
    for duration in durations:
        count += duration.count
        ns += duration.ns
    return StatisticDuration(count, ns)


def _mean_us(duration: StatisticDuration) -> float | None:
    return round(duration.ns / duration.count / 1e3, 1) if duration.count else None


def _rounded(us: float | None) -> float | None:
    return round(us, 1) if us is not None else None
