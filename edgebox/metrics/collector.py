"""One prometheus-client collector that reads every figure when scraped:
the scheduler's statistics snapshots, the repository index, the latest
telemetry sample, the streams' and the MQTT link's status, the rollouts'
status, the event bus's drop count. Nothing is cached or counted twice; a scrape costs the same
locks a ``/v2/models/stats`` request does.

Triton's inference counters keep Triton's exact series names
(``nv_inference_request_success{model,version}``). Triton declares them
``counter``, but prometheus-client renames every counter to ``<name>_total``
(the OpenMetrics rule), which would break the PromQL of dashboards made for
Triton; so they are ``exposition.TritonCounter`` families: samples under
Triton's names, declared ``counter`` by ``exposition.render``. edgebox's own
counters are true counters and so end in ``_total``. Failures carry no
``reason`` label: edgebox does not classify them as Triton 2.51 does.
``edgebox_request_duration_seconds`` is the statistics' latency histogram
made cumulative, its ``_sum`` and ``_count`` the very figures behind
``nv_inference_request_duration_us`` and ``nv_inference_request_success``,
so they agree within one scrape.

The telemetry families are built in ``telemetry_families.py``, the
rollout families in ``rollout_families.py``, the response cache's in
``cache_families.py``, the fleet agent's in ``fleet_families.py``, the active alerts' in
``alert_families.py``.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/metrics.md
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from edgebox.backends.python import custom_metrics
from edgebox.backends.python.custom_metrics import CustomMetricRegistry
from edgebox.dataplane_results import LATENCY_BUCKET_BOUNDS_US
from edgebox.events.stream_status import StreamStatus
from edgebox.lifecycle.states import ModelState
from edgebox.log_limiter import LogLimiter
from edgebox.metrics.alert_families import AlertSource, alert_families
from edgebox.metrics.cache_families import cache_families, per_model_cache_families
from edgebox.metrics.exposition import TritonCounter
from edgebox.metrics.fleet_families import FleetSource, fleet_families
from edgebox.metrics.rollout_families import RolloutSource, rollout_families
from edgebox.metrics.telemetry_families import telemetry_families
from edgebox.mqtt.link_stats import MqttStats
from edgebox.telemetry.sample import DeviceInfo, TelemetrySample

if TYPE_CHECKING:
    from edgebox.caching.response_cache import ResponseCache
    from edgebox.dataplane import DataPlane
    from edgebox.events import EventBus
    from edgebox.repository_control import RepositoryControl
    from edgebox.scheduling.statistics import StatisticsSnapshot

log = logging.getLogger(__name__)


_LATENCY_LE = (
    *(floatToGoString(round(us / 1e6, 9)) for us in LATENCY_BUCKET_BOUNDS_US),
    "+Inf",
)
"""``edgebox_request_duration_seconds``' ``le`` labels, the last the overflow."""

_TRITON_INFERENCE: tuple[tuple[str, str, Callable[[StatisticsSnapshot], float]], ...] = (
    (
        "nv_inference_request_success",
        "Number of successful inference requests, all batch sizes",
        lambda c: c.inference_stats.success.count,
    ),
    (
        "nv_inference_request_failure",
        "Number of failed inference requests, all batch sizes",
        lambda c: c.inference_stats.fail.count,
    ),
    (
        "nv_inference_count",
        "Number of inferences performed (does not include cached requests)",
        lambda c: c.inference_count,
    ),
    (
        "nv_inference_exec_count",
        "Number of model executions performed (does not include cached requests)",
        lambda c: c.execution_count,
    ),
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        lambda c: c.inference_stats.success.ns // 1000,
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        lambda c: c.inference_stats.queue.ns // 1000,
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        lambda c: c.inference_stats.compute_input.ns // 1000,
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        lambda c: c.inference_stats.compute_infer.ns // 1000,
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds "
        "(does not include cached requests)",
        lambda c: c.inference_stats.compute_output.ns // 1000,
    ),
)


class TelemetrySource(Protocol):
    """What the telemetry sampler offers: its latest sample (None before the
    first) and the device it runs on. Called on the scrape's thread."""

    def latest(self) -> TelemetrySample | None: ...

    @property
    def device(self) -> DeviceInfo: ...


class StreamSource(Protocol):
    def status(self) -> list[StreamStatus]: ...


class MqttSource(Protocol):
    def stats(self) -> MqttStats: ...


class MetricsCollector:
    """Registered in a ``CollectorRegistry``; ``collect`` runs on the metrics
    server's request threads, possibly two at once, and only reads its
    sources (each of them thread-safe). A part whose source is None is
    skipped; a source that raises leaves its part out of that scrape (logged,
    at most once a minute per part) while the others are still served."""

    def __init__(
        self,
        dataplane: DataPlane | None,
        repository_control: RepositoryControl | None = None,
        telemetry: TelemetrySource | None = None,
        streams: StreamSource | None = None,
        mqtt: MqttSource | None = None,
        bus: EventBus | None = None,
        custom: CustomMetricRegistry | None = custom_metrics.registry,
        gpu: bool = True,
        cpu: bool = True,
        rollouts: RolloutSource | None = None,
        response_cache: ResponseCache | None = None,
        fleet: FleetSource | None = None,
        alerts: AlertSource | None = None,
    ) -> None:
        """``gpu`` / ``cpu`` false leave the ``nv_gpu_*`` / ``nv_cpu_*``
        families out (``allow_gpu_metrics`` / ``allow_cpu_metrics``)."""
        self._dataplane = dataplane
        self._repository_control = repository_control
        self._gpu = gpu
        self._cpu = cpu
        self._custom = custom
        self._telemetry = telemetry
        self._streams = streams
        self._mqtt = mqtt
        self._bus = bus
        self._rollouts = rollouts
        self._log_limiter = LogLimiter(60.0)
        parts: list[tuple[str, Callable[[], Iterable[Metric]]]] = []
        if dataplane is not None:
            parts.append(("statistics", self._inference))
        if repository_control is not None:
            parts.append(("the repository index", self._models))
        if telemetry is not None:
            parts.append(("telemetry", self._telemetry_gauges))
        if streams is not None:
            parts.append(("streams", self._stream_metrics))
        if mqtt is not None:
            parts.append(("the MQTT link", self._mqtt_metrics))
        if rollouts is not None:
            parts.append(("the rollouts", lambda: rollout_families(rollouts)))
        if response_cache is not None:
            parts.append(
                ("the response cache", lambda: cache_families(response_cache.statistics()))
            )
        if fleet is not None:
            parts.append(("the fleet agent", lambda: fleet_families(fleet)))
        if alerts is not None:
            parts.append(("the alerts", lambda: alert_families(alerts)))
        if bus is not None:
            parts.append(("the event bus", self._bus_metrics))
        if custom is not None:
            parts.append(("custom metrics from model.py", self._custom_metrics))
        self._parts = parts

    def collect(self) -> Iterator[Metric]:
        """Every family with at least one series; empty ones are left out."""
        for part, build in self._parts:
            try:
                families = list(build())
            except Exception as exc:
                held = self._log_limiter.allow(part)
                if held is not None:
                    more = f" ({held} more since)" if held else ""
                    log.error(
                        "metrics: reading %s failed; left out of this scrape: %s: %s%s",
                        part,
                        type(exc).__name__,
                        exc,
                        more,
                        exc_info=exc,
                    )
                continue
            yield from (family for family in families if family.samples)

    def describe(self) -> list[Metric]:
        """Nothing: registering must not read the sources (they may not be
        started yet), and the names vary with what is present."""
        return []

    # -- parts -------------------------------------------------------------------

    def _inference(self) -> Iterator[Metric]:
        statistics = self._dataplane.statistics()
        for name, help_text, value in _TRITON_INFERENCE:
            family = TritonCounter(name, help_text)
            for entry in statistics:
                family.add_sample(
                    name, {"model": entry.name, "version": entry.version}, value(entry.counts)
                )
            yield family
        durations = HistogramMetricFamily(
            "edgebox_request_duration_seconds",
            "End-to-end duration of successful inference requests in the scheduler, "
            "the time nv_inference_request_duration_us sums",
            labels=["model", "version"],
        )
        for entry in statistics:
            cumulative = 0
            buckets = []
            for le, count in zip(_LATENCY_LE, entry.counts.request_latency.counts, strict=True):
                cumulative += count
                buckets.append((le, cumulative))
            durations.add_metric(
                [entry.name, entry.version],
                buckets,
                sum_value=entry.counts.inference_stats.success.ns / 1e9,
            )
        yield durations
        yield from per_model_cache_families(statistics)

    def _models(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "edgebox_model_unavailable",
            "1 for a model version UNAVAILABLE with a reason (failed load, crashed "
            "instance, unloaded), 0 otherwise; version is empty for a model that "
            "failed before any version (see /v2/repository/index for the reason)",
            labels=["model", "version"],
        )
        for entry in self._repository_control.repository_index():
            if entry.state is None:
                continue
            down = entry.state is ModelState.UNAVAILABLE and bool(entry.reason)
            family.add_metric([entry.name, entry.version or ""], 1 if down else 0)
        yield family

    def _telemetry_gauges(self) -> Iterator[Metric]:
        sample = self._telemetry.latest()
        if sample is not None:
            yield from telemetry_families(sample, gpu=self._gpu, cpu=self._cpu)

    def _stream_metrics(self) -> Iterator[Metric]:
        statuses = self._streams.status()
        fps = GaugeMetricFamily(
            "edgebox_stream_fps", "Results per second over the last seconds", labels=["stream"]
        )
        dropped = CounterMetricFamily(
            "edgebox_stream_frames_dropped",
            "Frames dropped from the stream's queue (oldest first) while the model was busy",
            labels=["stream"],
        )
        failures = CounterMetricFamily(
            "edgebox_stream_inference_failures",
            "Frames that reached the model but produced no result",
            labels=["stream"],
        )
        for status in statuses:
            fps.add_metric([status.name], status.fps)
            dropped.add_metric([status.name], status.frames_dropped)
            failures.add_metric([status.name], status.inference_failures)
        yield from (fps, dropped, failures)

    def _mqtt_metrics(self) -> Iterator[Metric]:
        stats = self._mqtt.stats()
        yield GaugeMetricFamily(
            "edgebox_mqtt_connected",
            "1 while the MQTT link to the broker is up",
            1 if stats.state == "connected" else 0,
        )
        yield GaugeMetricFamily(
            "edgebox_mqtt_spool_messages",
            "Messages spooled, not yet acknowledged",
            stats.spool_rows,
        )
        yield GaugeMetricFamily(
            "edgebox_mqtt_spool_bytes", "Bytes of the spooled messages", stats.spool_bytes
        )
        yield GaugeMetricFamily(
            "edgebox_mqtt_oldest_unsent_seconds",
            "Age of the oldest spooled message not yet sent; 0 when none waits",
            stats.oldest_unsent_age_s or 0.0,
        )
        yield CounterMetricFamily("edgebox_mqtt_sent", "Messages handed to the broker", stats.sent)
        yield CounterMetricFamily(
            "edgebox_mqtt_acknowledged", "Messages the broker acknowledged", stats.acknowledged
        )
        dropped = CounterMetricFamily(
            "edgebox_mqtt_dropped",
            "Messages dropped, per kind: spool cap (result, telemetry, event, status), "
            "queue (the bus queue overflowed), rejected (the broker refused it)",
            labels=["kind"],
        )
        for kind, count in stats.dropped.items():
            dropped.add_metric([kind], count)
        yield dropped

    def _bus_metrics(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "edgebox_event_drops",
            "Events the event bus dropped because a subscriber's queue was full",
            self._bus.dropped_total(),
        )

    def _custom_metrics(self) -> Iterator[Metric]:
        """python models' ``pb_utils.MetricFamily`` families, under their own
        names as Triton exports them: a counter a ``TritonCounter`` (no
        ``_total``), a histogram with the model's buckets. Each
        series keeps its own labels, as Triton lets them differ."""
        for family in self._custom.snapshot():
            if family.kind == custom_metrics.HISTOGRAM:
                metric = Metric(family.name, family.description, "histogram")
                for series in family.series:
                    cumulative = 0
                    bounds = (*(floatToGoString(b) for b in series.buckets), "+Inf")
                    for le, count in zip(bounds, series.counts, strict=True):
                        cumulative += count
                        labels = {**series.labels, "le": le}
                        metric.add_sample(f"{family.name}_bucket", labels, cumulative)
                    metric.add_sample(f"{family.name}_count", series.labels, cumulative)
                    metric.add_sample(f"{family.name}_sum", series.labels, series.sum)
                yield metric
                continue
            if family.kind == custom_metrics.GAUGE:
                metric = Metric(family.name, family.description, "gauge")
            else:
                metric = TritonCounter(family.name, family.description)
            for series in family.series:
                metric.add_sample(family.name, series.labels, series.value)
            yield metric
