"""The top-level settings: one field per setting, a docstring under each (the
flags' help and docs/configuration.md come from them), and the checks between
and within these fields.

Sections are fields whose type is a settings dataclass from its own package
(``mqtt``, ``dashboard``, ``telemetry``, ``streams``, ``fleet``); each checks
itself, and the checks here only look into one where a rule spans the two
(the dashboard's port against the daemon's, the fleet's need of MQTT).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from edgebox.alerts.settings import AlertSettings
from edgebox.caching.cache_config import cache_size_bytes
from edgebox.dashboard.settings import DashboardSettings
from edgebox.fleet.settings import FleetSettings
from edgebox.history.settings import HistorySettings
from edgebox.lifecycle.limits import (
    DEFAULT_MAX_INSTANCES_PER_MODEL,
    DEFAULT_MAX_INSTANCES_TOTAL,
    DEFAULT_MAX_WARMUP_REQUESTS,
)
from edgebox.mqtt.settings import MqttSettings
from edgebox.protocol.access_policy import parse_restrictions, read_api_key
from edgebox.repository.rollout_policy import RolloutPolicy
from edgebox.scheduling.rate_limiter import RATE_LIMIT_MODES, ResourceGiven
from edgebox.streams.settings import StreamSettings
from edgebox.telemetry.settings import TelemetrySettings

CONTROL_MODES = ("none", "poll", "explicit")
PYTHON_ISOLATION_MODES = ("in_process", "process")
"""The values of ``python_isolation`` (and of a model's ``EDGEBOX_ISOLATION``)."""
_LOAD_LIMITS = ("max_warmup_requests", "max_instances_per_model", "max_instances_total")
_RESTRICTION_GROUPS = ("http_restricted_api", "grpc_restricted_protocol")
_ENTRY_LISTS = (*_RESTRICTION_GROUPS, "cache_config")
"""Settings whose items hold commas, so text separates them by whitespace."""


@dataclasses.dataclass(frozen=True)
class Settings:
    model_repository: Path = Path("/var/lib/edgebox/models")
    """The Triton-style model repository to serve."""
    model_control_mode: str = dataclasses.field(
        default="poll",
        metadata={"choices": CONTROL_MODES, "help": "none, poll or explicit (as in Triton)"},
    )
    """``poll`` (the appliance default; Triton's is ``none``): load everything at
    start and follow changes on disk; ``none``: load everything once;
    ``explicit``: load only ``load_model`` and what the repository API asks for."""
    repository_poll_secs: float = 2.0
    """Seconds between repository scans in poll mode."""
    load_model: tuple[str, ...] = ()
    """Models to load at start in explicit mode; ``*`` means all."""
    host: str = "0.0.0.0"
    """Address the HTTP and gRPC services bind."""
    server_name: str = dataclasses.field(
        default="edgebox",
        metadata={
            "help": "name in server metadata (GET /v2, gRPC ServerMetadata); "
            "'triton' for clients that check it"
        },
    )
    """The ``name`` in server metadata (``GET /v2``, gRPC ``ServerMetadata``).
    Clients written for Triton that check ``name == "triton"`` (NVIDIA's own
    examples do) need ``triton`` here; the default says which server answers."""
    http_port: int = 8000
    """HTTP port (KServe v2); 0 picks a free port and logs it."""
    http_max_connections: int = 1024
    """Open HTTP connections at once; one more gets a 503. An open connection
    waiting for (the rest of) a request costs a socket, not a thread, so this is
    bounded by open files: the soft ``RLIMIT_NOFILE`` is raised to fit, or this
    is lowered with a warning when the hard limit is too low."""
    http_max_connections_per_client: int = 64
    """HTTP connections from one client address (loopback included) that may
    wait on the client at once: idle, or with a request still arriving.
    Connections being answered do not count, so one host may keep hundreds of
    busy ones (``perf_analyzer --concurrency-range 300``); one more waiting
    connection has a second to deliver a request, else it is closed (a 503 if
    a request was under way), and while the server is full it is the first to
    make room for another client, so one address cannot lock others out."""
    http_thread_count: int = 32
    """Threads answering HTTP requests (Triton's ``--http-thread-count``): a
    request holds one from the moment it has fully arrived until its answer is
    sent, including its wait in a model's queue, so this bounds the requests in
    flight (what dynamic batching can gather into one batch). Connections that
    are idle or still sending do not hold one."""
    http_min_transfer_bytes_per_s: int = 65536
    """Slowest average rate accepted for a request body and for a client
    reading a response: a body must arrive within 30 s (the header deadline)
    plus one second per this many bytes received, else 408; a response not
    taken at that rate is abandoned. 64 KiB/s passes a 64 MiB upload over any
    working link and cuts a client trickling bytes to hold the connection."""
    max_request_bytes: int = 64 * 1024 * 1024
    """Largest request body (HTTP) or request message (gRPC) accepted; larger
    ones are refused before being read."""
    http_max_body_bytes_in_flight: int = 0
    """Request body bytes held at once across every connection, from the
    moment a body's size is known until its request is done with it; a body
    that would go over is refused with a 503 before it is read, so clients
    declaring large bodies and sending them slowly cannot exhaust memory.
    0: four times ``max_request_bytes``, at least 256 MiB. Bodies under 64 KiB
    are not counted."""
    grpc_port: int = 8001
    """gRPC port (KServe v2 ``inference.GRPCInferenceService``, as Triton
    serves it); 0 picks a free port and logs it."""
    metrics_port: int = 8002
    """Prometheus metrics port (``GET /metrics``, Triton's names where Triton
    has the metric); 0 picks a free port and logs it."""
    allow_metrics: bool = True
    """Serve Prometheus metrics at all (Triton's ``--allow-metrics``). false:
    no metrics port is bound and nothing is built for a scrape; the dashboard
    and MQTT read their own sources and keep working. The endpoint has no
    access control, so an appliance on a shared LAN may want it off, or on
    loopback through ``metrics_address``."""
    metrics_address: str = dataclasses.field(
        default="",
        metadata={
            "help": "address the metrics port binds (empty: host); 127.0.0.1 = this device only"
        },
    )
    """Address the metrics port binds (Triton's ``--metrics-address``); empty:
    the same as ``host``. ``127.0.0.1`` keeps metrics on the device (for a
    local agent) while inference stays on the LAN."""
    allow_gpu_metrics: bool = True
    """Export Triton's ``nv_gpu_*`` families (Triton's ``--allow-gpu-metrics``;
    ignored unless ``allow_metrics``). The telemetry behind them is still
    sampled for the dashboard and MQTT."""
    allow_cpu_metrics: bool = True
    """Export Triton's ``nv_cpu_*`` families (Triton's ``--allow-cpu-metrics``;
    ignored unless ``allow_metrics``); edgebox's own telemetry families
    (temperatures, power rails, engines) stay."""
    grpc_thread_count: int = 32
    """gRPC requests worked on at once (decoding, the model call, encoding),
    unary calls and streams' requests each: a request holds a thread from the
    moment it has fully arrived until its answer is encoded, including its
    wait in a model's queue. Open streams hold threads of their own
    (``grpc_max_streams``), never these."""
    grpc_max_streams: int = 128
    """``ModelStreamInfer`` streams open at once; one more is refused
    (RESOURCE_EXHAUSTED). An open stream holds two threads, idle or not."""
    grpc_max_streams_per_client: int = 32
    """``ModelStreamInfer`` streams open at once from one client address
    (loopback included), so one client cannot take every stream."""
    grpc_max_concurrent_streams: int = 128
    """Calls one gRPC connection may have open at once (HTTP/2's
    ``SETTINGS_MAX_CONCURRENT_STREAMS``; a ``ModelStreamInfer`` stream is one
    call however many requests it carries): a client's further calls wait on
    its side until one ends."""
    shared_memory_max_bytes: int = 1 << 30
    """Bytes of system shared memory clients may have registered at once
    (Triton's ``system_shared_memory`` extension), summed over every region;
    a registration past it is refused with 400 / INVALID_ARGUMENT."""
    shared_memory_max_regions: int = 64
    """System shared-memory regions that may be registered at once."""
    load_files_max_bytes: int = 256 * 1024 * 1024
    """Bytes of model files that load requests (Triton's ``file:<path>``
    parameters, explicit mode) may have written at once, over every model
    loaded that way; they live in ``<state_directory>/override-models``, never
    in the repository. A load's own files over it are refused with 400; files
    that do not fit beside other models' with 503. One request's files are
    also bounded by ``max_request_bytes`` (over HTTP, base64 makes them a third
    larger). 0 refuses every load that carries files."""
    cache_config: tuple[str, ...] = ()
    """Triton's ``--cache-config`` entries, ``<cache>,<key>=<value>`` each
    (repeat the flag; a key given twice keeps its last value). Only Triton's
    ``local`` cache exists here: ``local,size=1048576`` keeps up to that many
    bytes of answers in memory, shared by every model whose config has
    ``response_cache { enable: true }``, least recently used evicted first.
    None given: no cache, and such models run every request (as in Triton).
    In the environment, entries are separated by whitespace."""
    strict_readiness: bool = False
    """Report ready only while every model has a ready version (Triton's default
    is true; an appliance with one broken model should still take traffic)."""
    exit_timeout_secs: float = 30.0
    """How long shutdown waits for in-flight requests and model loads in
    progress, in all; a load still inside a backend at the deadline (a python
    ``initialize`` that does not return) is left behind."""
    log_verbose: int = 0
    """0 logs state changes and problems; 1 adds debug detail."""
    max_warmup_requests: int = DEFAULT_MAX_WARMUP_REQUESTS
    """Most ``model_warmup`` requests one version runs (the sum of every
    entry's ``count``); a config asking for more is refused at load."""
    max_instances_per_model: int = DEFAULT_MAX_INSTANCES_PER_MODEL
    """Most instances one version's ``instance_group`` may create; a config
    asking for more is refused at load, never clamped."""
    max_instances_total: int = DEFAULT_MAX_INSTANCES_TOTAL
    """Most instances alive across every loaded version; a load that would go
    over is refused until others unload (a reload does not count the versions
    it replaces)."""
    max_threads_per_instance: int = 0
    """Most threads an ONNX Runtime instance may ask for in
    ``intra_op_thread_count`` or ``inter_op_thread_count``; 0: the machine's
    CPU cores (so the shipped file holds the same value on every module)."""
    rate_limit: str = dataclasses.field(
        default="off",
        metadata={"choices": RATE_LIMIT_MODES, "help": "off or execution_count (as in Triton)"},
    )
    """Triton's ``--rate-limit``. ``execution_count``: a model instance
    executes only once the resources its ``instance_group { rate_limiter }``
    names are free, in one queue across every model ordered by executions
    times priority (docs/configuration.md); ``off``: as soon as it is free."""
    rate_limit_resource: tuple[str, ...] = dataclasses.field(
        default=(), metadata={"metavar": "NAME:COUNT[:DEVICE]"}
    )
    """Triton's ``--rate-limit-resource`` (repeat the flag for more): copies
    of a resource on every device, or on DEVICE only; a resource not given
    has as many copies as the most any instance asks for. In the
    environment, separated by whitespace."""
    python_isolation: str = "in_process"
    """Where python models whose ``config.pbtxt`` has no ``EDGEBOX_ISOLATION``
    parameter run: ``in_process`` (in the daemon, fastest) or ``process`` (a
    child process per instance: a crash, a GIL-holding loop or a leak in
    ``model.py`` stays in it). See docs/python_models.md."""
    python_memory_limit_mb: int = 2048
    """Memory cap (RLIMIT_DATA, MB) of each isolated python model process whose
    config has no ``EDGEBOX_MEMORY_LIMIT_MB``; 0: no cap. A process past it
    fails its request and is restarted."""
    streams: tuple[StreamSettings, ...] = ()
    """Camera, video or synthetic streams to run through a model; none by
    default. YAML only in practice (a list of mappings); ``EDGEBOX_STREAMS``
    takes the same list as YAML text."""
    mqtt: MqttSettings | None = None
    """Publishing to an MQTT broker (docs/mqtt.md); absent: no MQTT. Any
    ``mqtt`` value from any layer (the YAML section, even empty,
    ``EDGEBOX_MQTT_<FIELD>``, ``--mqtt-<field>``) turns it on, with the
    defaults for the fields not given."""
    fleet: FleetSettings | None = None
    """Following a fleet's signed desired state (docs/fleet.md); absent: no
    fleet agent. Needs ``mqtt`` (the device id and the broker come from
    there) and ``model_control_mode`` poll. ``fleet:`` in YAML,
    ``EDGEBOX_FLEET_<FIELD>``, ``--fleet-<field>``; any of them turns it on."""
    dashboard: DashboardSettings = dataclasses.field(default_factory=DashboardSettings)
    """The web dashboard (docs/dashboard.md): on by default, on port 8080;
    ``dashboard:`` in YAML, ``EDGEBOX_DASHBOARD_<FIELD>`` and
    ``--dashboard-<field>`` set single fields, the others keep their defaults."""
    rollout: RolloutPolicy = dataclasses.field(default_factory=RolloutPolicy)
    """How a new model version proves itself before it serves
    (docs/rollout.md): the device-wide default, which a model's own
    ``rollout*`` parameters in its ``config.pbtxt`` override field by field.
    ``rollout:`` in YAML, ``EDGEBOX_ROLLOUT_<FIELD>``, ``--rollout-<field>``."""
    state_directory: Path = Path("/var/lib/edgebox/state")
    """Where edgebox keeps what must outlive a restart but is no setting:
    the rollouts' record of trusted, held and on-trial versions
    (``rollout.json``), the crash marks that quarantine a version the daemon
    died running, and the last fatal error's report (``fatal.log``). Written
    only when a rollout changes state: a few kilobytes per rollout. Also
    ``override-models/``: the files of models a load request sent
    (``load_files_max_bytes``) while they serve, emptied at start."""
    telemetry: TelemetrySettings = dataclasses.field(default_factory=TelemetrySettings)
    """Sampling the module's GPU, CPU, memory, temperatures and power
    (edgebox/telemetry/, docs/configuration.md): on by default; ``telemetry:``
    in YAML, ``EDGEBOX_TELEMETRY_<FIELD>`` and ``--telemetry-<field>`` set
    single fields."""
    http_restricted_api: tuple[str, ...] = ()
    """Triton's ``--http-restricted-api`` groups, ``API[,API...]:KEY=VALUE``
    each (repeat the flag for more groups): a request to a listed API needs
    header KEY holding VALUE, from every client, loopback included. APIs:
    model-repository, shared-memory, statistics, trace, logging, model-config,
    health, metadata, inference; each in at most one group. A listed API drops
    the appliance default for it (see ``api_key_file``). In the environment,
    groups are separated by whitespace."""
    grpc_restricted_protocol: tuple[str, ...] = ()
    """Triton's ``--grpc-restricted-protocol`` groups, same form and API names:
    a call to a listed API needs metadata ``triton-grpc-protocol-KEY`` holding
    VALUE (gRPC metadata keys are lower case, so KEY should be too)."""
    api_key_file: Path | None = dataclasses.field(
        default=None,
        metadata={
            "metavar": "FILE",
            "help": "key that lets non-loopback clients use model-repository, shared-memory, "
            "trace and logging (header edgebox-api-key)",
        },
    )
    """A file holding the appliance's API key (one line, at least 16 printable
    characters; not readable by every user). Without it, model-repository,
    shared-memory, trace and logging are served to loopback clients only (a
    stricter default than Triton's); with it, other clients may call them with
    the key in header ``edgebox-api-key``. APIs in ``http_restricted_api``
    follow their group instead."""
    history: HistorySettings = dataclasses.field(default_factory=HistorySettings)
    """The dashboard's history of request figures and telemetry over 15 min,
    1 h and 24 h (edgebox/history/, docs/dashboard.md "History"): on by
    default; the 1 h and 24 h tiers are kept in ``state_directory`` across
    restarts. ``history:`` in YAML, ``EDGEBOX_HISTORY_<FIELD>`` and
    ``--history-<field>`` set single fields."""
    alerts: AlertSettings = dataclasses.field(default_factory=AlertSettings)
    """What raises an alert on the dashboard's banner and MQTT ``events``
    (edgebox/alerts/, docs/configuration.md): on by default, every rule on;
    ``alerts:`` in YAML, ``EDGEBOX_ALERTS_<FIELD>`` and ``--alerts-<field>``
    set single fields."""

    @property
    def sources(self) -> dict[str, str]:
        """Where each setting given came from (``--http-port``,
        ``EDGEBOX_MQTT_QOS``, the file), by name (``mqtt.qos`` for a section
        field); set by the loader, empty for a ``Settings`` built directly."""
        return dict(getattr(self, "_sources", {}))

    @property
    def response_cache_bytes(self) -> int:
        """The response cache's size from ``cache_config``; 0: no cache."""
        return cache_size_bytes(self.cache_config)

    @property
    def resolved_metrics_address(self) -> str:
        """The address the metrics port binds: ``metrics_address``, else ``host``."""
        return self.metrics_address or self.host

    @classmethod
    def parse_field(cls, name: str, raw: Any, coerce: Callable[[Any], Any]) -> Any:
        """Triton's ``API[,API...]:KEY=VALUE`` groups, ``--cache-config``
        entries and ``--rate-limit-resource`` values come as a list (flags,
        YAML) or as text with items separated by whitespace (an item holds
        commas), and are checked the way the daemon will read them; every
        other field is read by its type."""
        if name == "rate_limit_resource":
            given = raw.split() if isinstance(raw, str) else raw
            given = tuple(
                str(item) for item in (given if isinstance(given, (list, tuple)) else [given])
            )
            for item in given:
                ResourceGiven.parse(item)
            return given
        if name not in _ENTRY_LISTS:
            return coerce(raw)
        groups = raw.split() if isinstance(raw, str) else raw
        if not isinstance(groups, (list, tuple)):
            groups = [groups]
        groups = tuple(str(group) for group in groups)
        if name == "cache_config":
            cache_size_bytes(groups)
        else:
            parse_restrictions(groups)
        return groups

    def problems(self) -> Iterator[tuple[str, str, tuple[str, ...]]]:
        """Each ``(setting, message, involves)`` wrong, in the order checked.
        ``involves`` names the other settings the check reads: the loader
        skips a check when any of those, or the setting itself, could not be
        read (its default stands in) or already has a problem, so one
        mistake makes one problem."""
        if self.model_control_mode not in CONTROL_MODES:
            yield (
                "model_control_mode",
                f"must be one of {', '.join(CONTROL_MODES)}, got '{self.model_control_mode}'",
                (),
            )
        if not self.server_name.strip():
            yield "server_name", "must not be empty", ()
        if self.repository_poll_secs <= 0:
            yield "repository_poll_secs", f"must be > 0, got {self.repository_poll_secs}", ()
        if not 0 <= self.http_port <= 65535:
            yield "http_port", f"must be 0..65535, got {self.http_port}", ()
        if not 0 <= self.grpc_port <= 65535:
            yield "grpc_port", f"must be 0..65535, got {self.grpc_port}", ()
        if self.grpc_port and self.grpc_port == self.http_port:
            yield (
                "grpc_port",
                f"must differ from http_port, both are {self.grpc_port}",
                ("http_port",),
            )
        dashboard = self.dashboard
        others = (self.http_port, self.grpc_port)
        if self.allow_metrics:
            others += (self.metrics_port,)
        if dashboard.enabled and dashboard.port and dashboard.port in others:
            yield (
                "dashboard.port",
                f"must differ from http_port, grpc_port and metrics_port, got {dashboard.port}",
                ("http_port", "grpc_port", "metrics_port"),
            )
        if not 0 <= self.metrics_port <= 65535:
            yield "metrics_port", f"must be 0..65535, got {self.metrics_port}", ()
        if not 1 <= self.grpc_thread_count <= 1024:
            yield "grpc_thread_count", f"must be 1..1024, got {self.grpc_thread_count}", ()
        if not 1 <= self.grpc_max_streams <= 4096:
            yield "grpc_max_streams", f"must be 1..4096, got {self.grpc_max_streams}", ()
        if self.grpc_max_streams_per_client < 1:
            yield (
                "grpc_max_streams_per_client",
                f"must be >= 1, got {self.grpc_max_streams_per_client}",
                (),
            )
        if self.grpc_max_concurrent_streams < 1:
            yield (
                "grpc_max_concurrent_streams",
                f"must be >= 1, got {self.grpc_max_concurrent_streams}",
                (),
            )
        for key in ("shared_memory_max_bytes", "shared_memory_max_regions", "load_files_max_bytes"):
            if getattr(self, key) < 0:
                yield key, f"must be >= 0, got {getattr(self, key)}", ()
        if self.http_max_connections < 1:
            yield "http_max_connections", "must be >= 1", ()
        if self.http_max_connections_per_client < 1:
            yield "http_max_connections_per_client", "must be >= 1", ()
        if not 1 <= self.http_thread_count <= 1024:
            yield "http_thread_count", f"must be 1..1024, got {self.http_thread_count}", ()
        if self.http_min_transfer_bytes_per_s < 1:
            yield "http_min_transfer_bytes_per_s", "must be >= 1", ()
        if self.max_request_bytes < 1:
            yield "max_request_bytes", "must be >= 1", ()
        if self.http_max_body_bytes_in_flight and (
            self.http_max_body_bytes_in_flight < self.max_request_bytes
        ):
            yield (
                "http_max_body_bytes_in_flight",
                f"must be 0 or at least max_request_bytes ({self.max_request_bytes}), "
                f"got {self.http_max_body_bytes_in_flight}",
                ("max_request_bytes",),
            )
        if self.exit_timeout_secs < 0:
            yield "exit_timeout_secs", "must be >= 0", ()
        if self.load_model and self.model_control_mode != "explicit":
            yield (
                "load_model",
                "only applies with model_control_mode explicit",
                ("model_control_mode",),
            )
        if self.rate_limit not in RATE_LIMIT_MODES:
            yield (
                "rate_limit",
                f"must be one of {', '.join(RATE_LIMIT_MODES)}, got '{self.rate_limit}'",
                (),
            )
        if self.python_isolation not in PYTHON_ISOLATION_MODES:
            yield (
                "python_isolation",
                f"must be one of {', '.join(PYTHON_ISOLATION_MODES)}, "
                f"got '{self.python_isolation}'",
                (),
            )
        if self.python_memory_limit_mb < 0:
            yield (
                "python_memory_limit_mb",
                f"must be >= 0, got {self.python_memory_limit_mb}",
                (),
            )
        if self.max_threads_per_instance < 0:
            yield (
                "max_threads_per_instance",
                f"must be >= 0 (0: the CPU cores), got {self.max_threads_per_instance}",
                (),
            )
        for key in _LOAD_LIMITS:
            if getattr(self, key) < 1:
                yield key, f"must be >= 1, got {getattr(self, key)}", ()
        if self.max_instances_per_model > self.max_instances_total:
            yield (
                "max_instances_per_model",
                f"must be <= max_instances_total ({self.max_instances_total}), "
                f"got {self.max_instances_per_model}",
                ("max_instances_total",),
            )
        if self.fleet is not None and self.mqtt is None:
            yield (
                "fleet",
                "needs the mqtt section: the desired state arrives over MQTT, and the "
                "device id and broker come from mqtt",
                ("mqtt",),
            )
        if self.fleet is not None and self.model_control_mode != "poll":
            yield (
                "fleet",
                "needs model_control_mode poll: the agent publishes versions into the "
                f"repository and poll mode loads them, got '{self.model_control_mode}'",
                ("model_control_mode",),
            )
        if self.api_key_file is not None:
            try:
                read_api_key(self.api_key_file)
            except ValueError as exc:
                yield "api_key_file", str(exc), ()
