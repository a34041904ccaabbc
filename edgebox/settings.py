"""The daemon's settings, read once at startup and passed down explicitly.

Layers, later ones winning: defaults -> the YAML file (``/etc/edgebox/edgebox.yaml``,
or ``--config FILE``) -> ``EDGEBOX_<NAME>`` environment variables -> command-line
flags. A bad value or an unknown key stops startup with the setting's name and
where it came from; nothing falls back silently.

A field whose type is a settings dataclass is a section, parsed generically:
``X | None`` (``mqtt``, off until given) or ``X`` (``dashboard``, on with its
defaults) is a mapping, merged field by field across layers
(``EDGEBOX_MQTT_QOS``, ``--mqtt-qos``), and ``tuple[X, ...]`` (``streams``) is a
list given whole by one layer. Each field is coerced by its type; the dataclass
may add ``parse_field(name, raw, coerce)`` (raise ValueError) to read a raw
value itself and ``problems()`` (yield ``(field, message)``) to check the whole.

Every problem is collected, not only the first: a ``SettingsError`` lists them
all (``problems``), each with the file and line it is on when it comes from the
YAML file, so ``edgebox serve`` and ``edgebox check --config`` report the same
list from the same code.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from edgebox.dashboard.settings import DashboardSettings
from edgebox.errors import EdgeboxError
from edgebox.lifecycle.limits import (
    DEFAULT_MAX_INSTANCES_PER_MODEL,
    DEFAULT_MAX_INSTANCES_TOTAL,
    DEFAULT_MAX_WARMUP_REQUESTS,
)
from edgebox.mqtt.settings import MqttSettings
from edgebox.protocol.access_policy import parse_restrictions, read_api_key
from edgebox.secrets_mask import mask_secrets
from edgebox.streams.source_spec import parse_source
from edgebox.telemetry.settings import TelemetrySettings

DEFAULT_CONFIG_FILE = Path("/etc/edgebox/edgebox.yaml")
CONTROL_MODES = ("none", "poll", "explicit")
PYTHON_ISOLATION_MODES = ("in_process", "process")
"""The values of ``python_isolation`` (and of a model's ``EDGEBOX_ISOLATION``)."""


Place = tuple[str, int] | None
"""Where a value is in the YAML file, ``(file, line)``; None for the
environment, flags and defaults."""


@dataclasses.dataclass(frozen=True)
class SettingsProblem:
    """One bad setting. ``message`` names the setting and its source
    (``setting 'mqtt.qos' from --mqtt-qos: ...``); ``located()`` puts the file
    and line first when the value is in the YAML file
    (``FILE:LINE: setting 'mqtt.qos': ...``)."""

    message: str
    file: str | None = None
    line: int | None = None
    setting: str | None = None
    """The setting at fault (``mqtt.qos``, ``streams[0]``); None for a key
    that is no setting."""
    detail: str = ""
    """What is wrong, without the setting's name and source."""

    def located(self) -> str:
        if self.file is None or self.line is None:
            return self.message
        what = f"setting '{self.setting}': {self.detail}" if self.setting else self.detail
        return f"{self.file}:{self.line}: {what}"


class SettingsError(EdgeboxError):
    """Every problem found (``problems``, one or more: those with a line in
    line order, then the others as found); ``str()`` holds their messages, one
    a line."""

    def __init__(self, problems: str | Sequence[SettingsProblem]) -> None:
        if isinstance(problems, str):
            problems = (SettingsProblem(problems),)
        self.problems: tuple[SettingsProblem, ...] = tuple(problems)
        super().__init__("\n".join(problem.message for problem in self.problems))


def _problem(
    setting: str, source: str, detail: str, place: Place = None, *, paren: bool = False
) -> SettingsProblem:
    """``detail`` may quote the value, which may be a camera URL with its
    password: masked before it reaches the journal."""
    detail = mask_secrets(detail)
    origin = f"({source})" if paren else f"from {source}"
    file, line = place or (None, None)
    return SettingsProblem(f"setting '{setting}' {origin}: {detail}", file, line, setting, detail)


def _nowhere(*_keys: str) -> Place:
    return None


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """One entry of ``streams``: frames from ``source`` run through ``model``
    (see docs/streams.md)."""

    name: str
    """Names the stream in the log, its status and results: letters, digits,
    ``_``, ``.`` and ``-`` (it is a level of its MQTT results topic)."""
    source: str
    """A V4L2 device (``/dev/video0`` or an index), a video file, an
    ``rtsp://`` URL, a GStreamer pipeline ending in ``appsink``, or
    ``synthetic:road``."""
    model: str = "lane_pipeline"
    """The model each frame goes to, always its current version; its one
    input must be UINT8 ``[-1,-1,3]`` (a BGR frame)."""
    fps: float = 15.0
    """Most frames per second taken from the source. 0: no cap; a camera's
    every frame is decoded (the queue still drops what the model cannot keep
    up with), a video file or synthetic source is read only as fast as the
    model goes, so every frame is inferred."""
    queue_frames: int = 1
    """Frames waiting for the model; when full the oldest is dropped (and
    counted), so results stay fresh rather than fall behind."""
    log_interval_s: float = 10.0
    """Seconds between the stream's summary lines in the log."""
    in_flight: int = 2
    """Frames inferred at once. With 2, a frame's preprocessing overlaps the
    previous frame's model (an ensemble's steps each have their own
    instances), which matters when the model is a few-millisecond TensorRT
    engine; results are published in frame order either way."""
    results_every_n: int = 1
    """Publish every n-th result over MQTT (1: each one); the others still
    count in the stream's log line."""
    max_results_per_s: float = 0.0
    """Most results published over MQTT per second, on top of
    ``results_every_n``; 0: no cap."""

    ENTRY_KEYS = ("name", "source", "model", "fps")
    """The keys named when an entry is not a mapping."""

    @classmethod
    def parse_field(cls, name: str, raw: Any, coerce: Callable[[Any], Any]) -> Any:
        if name == "name":
            if not isinstance(raw, str) or not _STREAM_NAME.fullmatch(raw):
                raise ValueError(
                    "expected 1-64 letters, digits, '_', '.' or '-' (starting with a letter "
                    f"or digit), got {raw!r}"
                )
            return raw
        if name == "source":
            parse_source(raw)
            return str(raw).strip()
        if name == "model":
            if not isinstance(raw, str) or not raw.strip():
                raise ValueError(f"expected a model name, got {raw!r}")
            return raw.strip()
        accept, expected = _STREAM_RANGES[name]
        return _in_range(raw, coerce, accept, expected)

    @staticmethod
    def entries_problem(entries: tuple[StreamSettings, ...]) -> tuple[int, str, str] | None:
        seen: dict[str, int] = {}
        for index, stream in enumerate(entries):
            if stream.name in seen:
                return (
                    index,
                    "name",
                    f"stream name '{stream.name}' is already used by streams[{seen[stream.name]}]",
                )
            seen[stream.name] = index
        return None


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
            "help": "address the metrics port binds (empty: host); "
            "127.0.0.1 = this device only"
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
    """Threads doing gRPC requests' work (decoding, the model call, encoding):
    a request holds one from the moment it has fully arrived until its answer
    is encoded, including its wait in a model's queue, so this bounds the gRPC
    requests in flight. An open ``ModelStreamInfer`` stream holds none while
    it waits for its next request."""
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
    dashboard: DashboardSettings = dataclasses.field(default_factory=DashboardSettings)
    """The web dashboard (docs/dashboard.md): on by default, on port 8080;
    ``dashboard:`` in YAML, ``EDGEBOX_DASHBOARD_<FIELD>`` and
    ``--dashboard-<field>`` set single fields, the others keep their defaults."""
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

    @property
    def sources(self) -> dict[str, str]:
        return dict(getattr(self, "_sources", {}))

    @property
    def resolved_metrics_address(self) -> str:
        """The address the metrics port binds: ``metrics_address``, else ``host``."""
        return self.metrics_address or self.host


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


def _dataclass_in(hint: Any) -> type | None:
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
            return candidate
    return None


_HINTS = typing.get_type_hints(Settings)
SECTIONS: dict[str, type] = {
    name: cls
    for name, hint in _HINTS.items()
    if typing.get_origin(hint) is not tuple and (cls := _dataclass_in(hint)) is not None
}
"""Mapping sections (``mqtt``): the field name and its settings dataclass."""
_LIST_SECTIONS: dict[str, type] = {
    name: cls
    for name, hint in _HINTS.items()
    if typing.get_origin(hint) is tuple and (cls := _dataclass_in(hint)) is not None
}
_SECTION_FIELDS: dict[str, tuple[str, str]] = {
    f"{section}_{field.name}": (section, field.name)
    for section, cls in SECTIONS.items()
    for field in dataclasses.fields(cls)
}
"""``mqtt_qos`` (from ``EDGEBOX_MQTT_QOS`` or ``--mqtt-qos``) -> ``("mqtt", "qos")``."""


def load_settings(
    flags: Mapping[str, Any],
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from the layers; ``flags`` holds only flags the user gave.
    SettingsError lists every problem in every layer; a value that failed is
    not judged again through its default (no second, misleading problem)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    sections: dict[str, dict[str, Any]] = {}
    shown: dict[str, str] = {}  # "mqtt.qos" -> its source with the YAML line, for messages
    places: dict[str, Place] = {}  # "http_port", "mqtt.qos" -> where in the file, if there
    problems: list[SettingsProblem] = []
    failed: set[str] = set()
    environ = os.environ if environ is None else environ

    def collect(key: str, error: SettingsError) -> None:
        problems.extend(error.problems)
        failed.add(key)

    def set_field(
        section: str, name: str, raw: Any, source: str, where: str, place: Place = None
    ) -> None:
        dotted = f"{section}.{name}"
        fields = sections.setdefault(section, {})
        failed.discard(dotted)
        try:
            fields[name] = _field_value(SECTIONS[section], dotted, name, raw, where, place)
        except SettingsError as exc:
            collect(dotted, exc)
            fields.pop(name, None)
        sources[dotted] = source
        shown[dotted] = where
        places[dotted] = place

    def set_section(
        section: str,
        value: Any,
        source: str,
        where: Callable[[str | None], str],
        at: Callable[..., Place] = _nowhere,
    ) -> None:
        sections.setdefault(section, {})
        if value is None:  # ``mqtt:`` with every field commented out: on, with the defaults
            return
        cls = SECTIONS[section]
        problems.extend(
            _check_keys(cls, value, section, where(None), False, lambda name: at(section, *name))
        )
        if not isinstance(value, dict):
            failed.add(section)
            return
        known = {f.name for f in dataclasses.fields(cls)}
        for name, raw in value.items():
            if name in known:
                set_field(section, name, raw, source, where(name), at(section, name))

    def set_value(key: str, value: Any, source: str, at: Callable[..., Place] = _nowhere) -> None:
        failed.discard(key)
        try:
            values[key] = _coerce(key, value, source, at)
        except SettingsError as exc:
            collect(key, exc)
        sources[key] = source
        places[key] = at(key)

    path = config_file or DEFAULT_CONFIG_FILE
    if config_file is not None or path.exists():
        document, lines = _read_yaml(path)

        def at(*keys: str) -> Place:
            line = lines.get(keys)
            return (str(path), line) if line else None

        for key, value in document.items():
            if key not in _FIELDS:
                detail = _unknown(str(key), str(key))
                place = at(str(key))
                problems.append(
                    SettingsProblem(
                        f"{path}: {detail}", str(path), place and place[1], None, detail
                    )
                )
                continue
            if key in SECTIONS:

                def where(name: str | None, key: str = key) -> str:
                    line = lines.get((key, name) if name else (key,))
                    return f"{path}:{line}" if line else str(path)

                set_section(key, value, str(path), where, at)
                continue
            set_value(key, value, str(path), at)
    for env_name, text in environ.items():
        if not env_name.startswith("EDGEBOX_"):
            continue
        key = env_name.removeprefix("EDGEBOX_").lower()
        if key in SECTIONS:
            try:
                mapping = _yaml_text(key, text, env_name)
            except SettingsError as exc:
                collect(key, exc)
                continue
            set_section(key, mapping, env_name, lambda _name, env_name=env_name: env_name)
        elif key in _SECTION_FIELDS:
            set_field(*_SECTION_FIELDS[key], text, env_name, env_name)
        elif key in _FIELDS:
            set_value(key, text, env_name)
        else:
            problems.append(SettingsProblem(_unknown(key, env_name)))
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if key in _SECTION_FIELDS:
            set_field(*_SECTION_FIELDS[key], value, flag, flag)
            continue
        set_value(key, value, flag)

    for section, fields in sections.items():
        skip = {
            f.name for f in dataclasses.fields(SECTIONS[section]) if f"{section}.{f.name}" in failed
        }
        values[section], found = _build(
            SECTIONS[section],
            fields,
            section,
            shown,
            lambda name, section=section: places.get(f"{section}.{name}"),
            skip,
        )
        problems.extend(found)
    settings = Settings(**values)
    object.__setattr__(settings, "_sources", sources)
    problems.extend(_validate(settings, sources, places, failed))
    if problems:
        problems.sort(key=lambda problem: (problem.line is None, problem.line or 0))
        raise SettingsError(problems)
    return settings


def _read_yaml(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """The document, and the line of each key down to three levels, list
    items counted by their index (``("mqtt", "qos")`` -> 12,
    ``("streams", "0", "fps")`` -> 20, ``("streams", "0")`` -> the entry's
    first line). A file that cannot be read or parsed is one problem: nothing
    else can be judged."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read configuration file '{path}': {exc.strerror}") from None
    try:
        document = yaml.safe_load(text) or {}
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = SettingsProblem(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}")
        raise SettingsError([problem]) from None
    if not isinstance(document, dict):
        raise SettingsError(f"{path}: the top level must be a mapping of setting: value")
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: yaml.Node | None, keys: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            children = [(str(key.value), key, value) for key, value in node.value]
        elif isinstance(node, yaml.SequenceNode):
            children = [(str(index), item, item) for index, item in enumerate(node.value)]
        else:
            return
        for name, marked, child in children:
            lines[(*keys, name)] = marked.start_mark.line + 1
            if len(keys) < 2:
                walk(child, (*keys, name))

    walk(root, ())
    return document, lines


def _did_you_mean(key: str, candidates: list[str]) -> str:
    guess = difflib.get_close_matches(key.replace("-", "_"), candidates, n=1)
    return f"; did you mean '{guess[0]}'?" if guess else ""


def _unknown(key: str, shown: str) -> str:
    hint = _did_you_mean(key, [*_FIELDS, *_SECTION_FIELDS])
    for flat, (section, name) in _SECTION_FIELDS.items():
        hint = hint.replace(f"'{flat}'", f"'{section}.{name}'")
    return f"unknown setting '{shown}'{hint}"


def _coerce(key: str, value: Any, source: str, at: Callable[..., Place] = _nowhere) -> Any:
    """A top-level value; ``at(key, ...)`` locates it (and its items) in the file."""
    if key in _LIST_SECTIONS:
        return _entries(key, _LIST_SECTIONS[key], value, source, at)
    if key in _RESTRICTION_GROUPS:
        return _restriction_groups(key, value, source, at(key))
    try:
        return _convert(_FIELDS[key].type, value)
    except ValueError as exc:
        raise SettingsError([_problem(key, source, str(exc), at(key))]) from None


def _convert(kind: str, value: Any) -> Any:
    """``value`` (from YAML, or text from the environment or a flag) as a
    ``kind`` (the field's annotation); ValueError says what was expected."""
    if value is None and kind.endswith("| None"):
        return None
    try:
        # An empty YAML value is None; str() would turn it into the name 'None'.
        if value is None or isinstance(value, dict):
            raise ValueError(value)
        if isinstance(value, list) and kind != "tuple[str, ...]":
            raise ValueError(value)
        if kind in ("Path", "Path | None"):
            return Path(str(value))
        if kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError(value)
            number = float(value)
            if not math.isfinite(number):  # nan passes every range check below
                raise ValueError(value)
            return number
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind == "tuple[str, ...]":
            if isinstance(value, str):
                return tuple(v.strip() for v in value.split(",") if v.strip())
            return tuple(str(v) for v in value)
        return str(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"expected {kind.replace('tuple[str, ...]', 'a list')}, got {value!r}"
        ) from None


def _yaml_text(key: str, value: Any, source: str) -> Any:
    """A section given as YAML text (``EDGEBOX_STREAMS``, ``EDGEBOX_MQTT``)."""
    if not isinstance(value, str):
        return value
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise SettingsError(
            f"setting '{key}' from {source}: not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None


def _check_keys(
    cls: type,
    entry: Any,
    where: str,
    source: str,
    required: bool,
    place: Callable[[tuple[str, ...]], Place] = lambda _keys: None,
) -> list[SettingsProblem]:
    """The problems with ``entry`` as a mapping of ``cls``'s fields (with the
    required ones when ``required``): each unknown key, each missing one.
    ``where`` names it (``mqtt``, ``streams[0]``); ``place(())`` locates the
    entry, ``place((key,))`` one of its keys."""
    fields = [f.name for f in dataclasses.fields(cls)]
    if not isinstance(entry, dict):
        keys = getattr(cls, "ENTRY_KEYS", None)
        expected = f"with {', '.join(keys)}" if keys else f"of {where} settings"
        detail = f"expected a mapping {expected}, got {entry!r}"
        return [_problem(where, source, detail, place(()))]
    problems = [
        _problem(
            where,
            source,
            f"unknown key '{key}'{_did_you_mean(str(key), fields)}",
            place((str(key),)),
        )
        for key in entry
        if key not in fields
    ]
    if required:
        problems += [
            _problem(where, source, f"missing required key '{field.name}'", place(()))
            for field in dataclasses.fields(cls)
            if field.default is dataclasses.MISSING and field.name not in entry
        ]
    return problems


def _field_value(
    cls: type, dotted: str, name: str, raw: Any, where: str, place: Place = None
) -> Any:
    """One field of a section, through the dataclass's ``parse_field`` if it
    has one, else coerced by the field's type."""
    kind = next(f.type for f in dataclasses.fields(cls) if f.name == name)

    def coerce(value: Any) -> Any:
        return _convert(kind, value)

    parse = getattr(cls, "parse_field", None)
    try:
        return parse(name, raw, coerce) if parse else coerce(raw)
    except ValueError as exc:
        raise SettingsError([_problem(dotted, where, str(exc), place)]) from None


def _build(
    cls: type,
    fields: dict[str, Any],
    where: str,
    shown: Mapping[str, str],
    place: Callable[[str], Place] = lambda _name: None,
    skip: set[str] | frozenset[str] = frozenset(),
) -> tuple[Any, list[SettingsProblem]]:
    """A section's dataclass and what its ``problems()`` (if any) found, but
    for fields in ``skip`` (their given value already failed, so the default
    in their place is not judged)."""
    section = cls(**fields)
    problems = []
    for name, message in getattr(section, "problems", lambda: ())():
        if name in skip:
            continue
        dotted = f"{where}.{name}"
        if dotted in shown:
            problems.append(_problem(dotted, shown[dotted], message, place(name)))
        else:
            problems.append(_problem(dotted, "default", message, paren=True))
    return section, problems


def _validate(
    settings: Settings,
    sources: dict[str, str],
    places: Mapping[str, Place],
    failed: set[str] | frozenset[str] = frozenset(),
) -> list[SettingsProblem]:
    """Every problem between and within the top-level settings, in the order
    checked; ``places`` locates the values that came from the file. A check
    is skipped when a setting it involves is in ``failed`` (its given value
    could not be read, so the default stands in) or already has a problem
    here: one mistake, one problem."""
    problems: list[SettingsProblem] = []
    bad = set(failed)

    def fail(key: str, message: str, *involves: str) -> None:
        if bad.intersection((key, *involves)):
            return
        bad.add(key)
        source = sources.get(key, "default")
        problems.append(_problem(key, source, message, places.get(key), paren=True))

    if settings.model_control_mode not in CONTROL_MODES:
        fail(
            "model_control_mode",
            f"must be one of {', '.join(CONTROL_MODES)}, got '{settings.model_control_mode}'",
        )
    if not settings.server_name.strip():
        fail("server_name", "must not be empty")
    if settings.repository_poll_secs <= 0:
        fail("repository_poll_secs", f"must be > 0, got {settings.repository_poll_secs}")
    if not 0 <= settings.http_port <= 65535:
        fail("http_port", f"must be 0..65535, got {settings.http_port}")
    if not 0 <= settings.grpc_port <= 65535:
        fail("grpc_port", f"must be 0..65535, got {settings.grpc_port}")
    if settings.grpc_port and settings.grpc_port == settings.http_port:
        fail("grpc_port", f"must differ from http_port, both are {settings.grpc_port}", "http_port")
    dashboard = settings.dashboard
    others = (settings.http_port, settings.grpc_port)
    if settings.allow_metrics:
        others += (settings.metrics_port,)
    if dashboard.enabled and dashboard.port and dashboard.port in others:
        fail(
            "dashboard.port",
            f"must differ from http_port, grpc_port and metrics_port, got {dashboard.port}",
            "http_port",
            "grpc_port",
            "metrics_port",
        )
    if not 0 <= settings.metrics_port <= 65535:
        fail("metrics_port", f"must be 0..65535, got {settings.metrics_port}")
    if not 1 <= settings.grpc_thread_count <= 1024:
        fail("grpc_thread_count", f"must be 1..1024, got {settings.grpc_thread_count}")
    if settings.grpc_max_concurrent_streams < 1:
        fail(
            "grpc_max_concurrent_streams",
            f"must be >= 1, got {settings.grpc_max_concurrent_streams}",
        )
    for key in ("shared_memory_max_bytes", "shared_memory_max_regions"):
        if getattr(settings, key) < 0:
            fail(key, f"must be >= 0, got {getattr(settings, key)}")
    if settings.http_max_connections < 1:
        fail("http_max_connections", "must be >= 1")
    if settings.http_max_connections_per_client < 1:
        fail("http_max_connections_per_client", "must be >= 1")
    if not 1 <= settings.http_thread_count <= 1024:
        fail("http_thread_count", f"must be 1..1024, got {settings.http_thread_count}")
    if settings.http_min_transfer_bytes_per_s < 1:
        fail("http_min_transfer_bytes_per_s", "must be >= 1")
    if settings.max_request_bytes < 1:
        fail("max_request_bytes", "must be >= 1")
    if settings.http_max_body_bytes_in_flight and (
        settings.http_max_body_bytes_in_flight < settings.max_request_bytes
    ):
        fail(
            "http_max_body_bytes_in_flight",
            f"must be 0 or at least max_request_bytes ({settings.max_request_bytes}), "
            f"got {settings.http_max_body_bytes_in_flight}",
            "max_request_bytes",
        )
    if settings.exit_timeout_secs < 0:
        fail("exit_timeout_secs", "must be >= 0")
    if settings.load_model and settings.model_control_mode != "explicit":
        fail("load_model", "only applies with model_control_mode explicit", "model_control_mode")
    if settings.python_isolation not in PYTHON_ISOLATION_MODES:
        fail(
            "python_isolation",
            f"must be one of {', '.join(PYTHON_ISOLATION_MODES)}, "
            f"got '{settings.python_isolation}'",
        )
    if settings.python_memory_limit_mb < 0:
        fail("python_memory_limit_mb", f"must be >= 0, got {settings.python_memory_limit_mb}")
    if settings.max_threads_per_instance < 0:
        fail(
            "max_threads_per_instance",
            f"must be >= 0 (0: the CPU cores), got {settings.max_threads_per_instance}",
        )
    for key in _LOAD_LIMITS:
        if getattr(settings, key) < 1:
            fail(key, f"must be >= 1, got {getattr(settings, key)}")
    if settings.max_instances_per_model > settings.max_instances_total:
        fail(
            "max_instances_per_model",
            f"must be <= max_instances_total ({settings.max_instances_total}), "
            f"got {settings.max_instances_per_model}",
            "max_instances_total",
        )
    if settings.api_key_file is not None:
        try:
            read_api_key(settings.api_key_file)
        except ValueError as exc:
            fail("api_key_file", str(exc))
    return problems


_LOAD_LIMITS = (
    "max_warmup_requests",
    "max_instances_per_model",
    "max_instances_total",
)
_RESTRICTION_GROUPS = ("http_restricted_api", "grpc_restricted_protocol")


def _restriction_groups(key: str, value: Any, source: str, place: Place) -> tuple[str, ...]:
    """Triton's ``API[,API...]:KEY=VALUE`` groups: a list (flags, YAML) or text
    with groups separated by whitespace (a group holds commas); checked the way
    the daemon will read them."""
    groups = value.split() if isinstance(value, str) else value
    if not isinstance(groups, (list, tuple)):
        groups = [groups]
    groups = tuple(str(group) for group in groups)
    try:
        parse_restrictions(groups)
    except ValueError as exc:
        raise SettingsError([_problem(key, source, str(exc), place)]) from None
    return groups


_STREAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_QUEUE_FRAMES = 64
MAX_IN_FLIGHT = 4
_STREAM_RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "fps": (lambda v: v >= 0, "a number >= 0 (0: no cap)"),
    "queue_frames": (lambda v: 1 <= v <= MAX_QUEUE_FRAMES, f"an integer 1..{MAX_QUEUE_FRAMES}"),
    "in_flight": (lambda v: 1 <= v <= MAX_IN_FLIGHT, f"an integer 1..{MAX_IN_FLIGHT}"),
    "log_interval_s": (lambda v: v > 0, "a number > 0"),
    "results_every_n": (lambda v: v >= 1, "an integer >= 1"),
    "max_results_per_s": (lambda v: v >= 0, "a number >= 0 (0: no cap)"),
}
"""Each numeric stream field: what it accepts, and the words for it."""


def _in_range(
    raw: Any, coerce: Callable[[Any], Any], accept: Callable[[Any], bool], expected: str
) -> Any:
    try:
        value = coerce(raw)
    except ValueError:
        value = None
    if value is None or not accept(value):
        raise ValueError(f"expected {expected}, got {raw!r}")
    return value


def _entries(
    key: str, cls: type, value: Any, source: str, at: Callable[..., Place] = _nowhere
) -> tuple[Any, ...]:
    """A list section (``streams``) from YAML (a list of mappings) or from text
    holding such a list (the environment); every problem of every entry names
    the entry and its key (and, from the file, its line)."""
    value = _yaml_text(key, value, source)
    if not isinstance(value, list):
        keys = ", ".join(getattr(cls, "ENTRY_KEYS", ()))
        detail = f"expected a list of {key} (each with {keys}), got {value!r}"
        raise SettingsError([_problem(key, source, detail, at(key))])
    entries = []
    problems: list[SettingsProblem] = []
    for index, entry in enumerate(value):
        where = f"{key}[{index}]"

        def place(keys: tuple[str, ...], index: int = index) -> Place:
            return at(key, str(index), *keys)

        found = _check_keys(cls, entry, where, source, True, place)
        problems += found
        if not isinstance(entry, dict):
            continue
        fields = {}
        for field in dataclasses.fields(cls):
            if field.name not in entry:
                continue
            try:
                fields[field.name] = _field_value(
                    cls,
                    f"{where}.{field.name}",
                    field.name,
                    entry[field.name],
                    source,
                    place((field.name,)),
                )
            except SettingsError as exc:
                problems += exc.problems
                found.append(exc.problems[0])
        if found:
            continue
        built, found = _build(
            cls,
            fields,
            where,
            {f"{where}.{name}": source for name in fields},
            lambda name, place=place: place((name,)),
        )
        problems += found
        entries.append((index, built))
    problem = getattr(cls, "entries_problem", lambda _entries: None)(
        tuple(built for _, built in entries)
    )
    if problem is not None:
        position, name, message = problem
        index = entries[position][0]
        problems.append(
            _problem(f"{key}[{index}].{name}", source, message, at(key, str(index), name))
        )
    if problems:
        raise SettingsError(problems)
    return tuple(built for _, built in entries)
