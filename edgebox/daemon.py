"""The composition root: builds every part, starts them in order, and stops them
in reverse on SIGTERM (finishing in-flight requests first). SIGHUP re-reads the
settings and applies what can change live (``reload``, ``live_reload``). Each
transport is built by its own ``wiring`` module from the settings and the
parts built here.

Signal handlers only set a flag and wake the main thread, which does the
work: a reload runs there, between watchdog pings, never on a request's path.

Shutdown wins over any load: the models found at start load on their own
thread while the main thread waits for them or for SIGTERM, and shutdown first
cancels every load in progress, so a long warm-up or a slow ``initialize``
never keeps the daemon past ``exit_timeout_secs``.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from edgebox.alerts.evaluator import AlertEvaluator
from edgebox.alerts.rule_set import build_rules
from edgebox.backends import BackendCatalog
from edgebox.caching.response_cache import ResponseCache
from edgebox.dashboard.deps import DashboardDeps
from edgebox.dashboard.password_file import exposure
from edgebox.dashboard.server import DashboardServer
from edgebox.dataplane import DataPlane
from edgebox.devices import gpu_ids
from edgebox.events import EventBus
from edgebox.fleet.agent import FleetAgent
from edgebox.fleet.figures import FleetFigures
from edgebox.fleet.wiring import build_agent
from edgebox.history.persistence import FILE_NAME as HISTORY_FILE_NAME
from edgebox.history.sampler import HistorySampler
from edgebox.lifecycle.limits import LoadLimits, default_max_threads_per_instance
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.rollout.rollouts import Rollouts
from edgebox.lifecycle.rollout.state_directory import open_state
from edgebox.live_reload import reload_settings
from edgebox.log_ring import LogRing
from edgebox.malloc_tuning import tune_malloc
from edgebox.metrics.collector import MetricsCollector
from edgebox.metrics.server import MetricsServer
from edgebox.mqtt.bridge import build_forwarder, result_tap
from edgebox.mqtt.forwarder import MqttForwarder
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.grpc.access import grpc_policy
from edgebox.protocol.grpc.wiring import grpc_server
from edgebox.protocol.http.wiring import http_server
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.repository.override_folders import OVERRIDE_FOLDER_NAME, OverrideFolders
from edgebox.repository.poller import RepositoryPoller
from edgebox.repository_control import RepositoryControl
from edgebox.scheduling.rate_limiter import RateLimiter, ResourceGiven
from edgebox.sd_notify import notify, watchdog_interval_s
from edgebox.settings import Settings
from edgebox.streams.manager import StreamManager
from edgebox.telemetry.choice import open_source
from edgebox.telemetry.sampler import Telemetry
from edgebox.telemetry.thermal_guard import ThermalGuard

log = logging.getLogger("edgebox")


class Daemon:
    def __init__(
        self,
        settings: Settings,
        reread: Callable[[], Settings] | None = None,
        catch_faults: bool = False,
        log_ring: LogRing | None = None,
    ) -> None:
        """``reread`` builds the settings again from the same layers as at
        start (the CLI's file, environment and flags), for SIGHUP; raises
        SettingsError when they are wrong. None: nothing to re-read.
        ``catch_faults``: this process is the daemon, so fatal errors are
        reported into the state directory (``state_directory.py``).
        ``log_ring``: the recent log records the dashboard's Logs page shows
        (None: the page says logs are not kept)."""
        self.settings = settings
        """What the daemon runs on: after a reload, the live fields' new
        values and the others' old ones."""
        self._reread = reread
        self.bus = EventBus()
        self.registry = ModelRegistry(self.bus)
        self._rollout_state = open_state(settings.state_directory, catch_faults)
        self.rollouts = Rollouts(
            self.registry,
            self._rollout_state.store,
            self._rollout_state.marks,
            self.bus,
            settings.rollout,
            park_rolled_back=settings.model_control_mode == "poll",
            previous_fatal=self._rollout_state.previous_fatal,
        )
        self.manager = LifecycleManager(
            settings.model_repository,
            self.registry,
            BackendCatalog(settings.python_isolation, settings.python_memory_limit_mb),
            infer=lambda request: self.dataplane.infer(request),
            infer_stream=lambda request, sink: self.dataplane.infer_stream(request, sink),
            gpu_ids=gpu_ids(),
            limits=LoadLimits(
                max_warmup_requests=settings.max_warmup_requests,
                max_instances_per_model=settings.max_instances_per_model,
                max_instances_total=settings.max_instances_total,
                max_threads_per_instance=settings.max_threads_per_instance
                or default_max_threads_per_instance(),
            ),
            rollouts=self.rollouts,
            rate_limiter=(
                RateLimiter(map(ResourceGiven.parse, settings.rate_limit_resource))
                if settings.rate_limit == "execution_count"
                else None
            ),
        )
        cache_bytes = settings.response_cache_bytes
        self.response_cache = ResponseCache(cache_bytes) if cache_bytes else None
        self.dataplane = DataPlane(
            self.registry,
            strict_readiness=settings.strict_readiness,
            server_name=settings.server_name,
            result_tap=result_tap(self.bus) if settings.mqtt is not None else None,
            response_cache=self.response_cache,
        )
        self.repository_control = RepositoryControl(
            self.registry,
            self.manager,
            self.dataplane.live,
            settings.model_control_mode,
            OverrideFolders(
                settings.state_directory / OVERRIDE_FOLDER_NAME, settings.load_files_max_bytes
            ),
        )
        self.access = AccessPolicy.from_settings(
            settings.http_restricted_api, settings.api_key_file
        )
        self.shared_memory = SharedMemoryRegistry(
            settings.shared_memory_max_bytes, settings.shared_memory_max_regions
        )
        self.http = http_server(
            settings, self.dataplane, self.repository_control, self.shared_memory, self.access
        )
        self.grpc_access = grpc_policy(settings.grpc_restricted_protocol, settings.api_key_file)
        self.grpc = grpc_server(
            settings, self.dataplane, self.repository_control, self.shared_memory, self.grpc_access
        )
        self.streams = StreamManager(settings.streams, self.dataplane, self.bus)
        self.mqtt: MqttForwarder | None = None
        if settings.mqtt is not None:
            # Subscribed from here on: the first loads' events are published too.
            self.mqtt = build_forwarder(
                settings.mqtt, self.bus, self.registry, settings.streams, self._stream_states
            )
        self.fleet: FleetAgent | None = None
        self.fleet_figures: FleetFigures | None = None
        if settings.fleet is not None and self.mqtt is not None:
            self.fleet, self.fleet_figures, topic = build_agent(
                settings.fleet,
                settings.mqtt,
                settings.model_repository,
                settings.state_directory,
                self.registry,
                self.rollouts,
                self.bus,
            )
            self.mqtt.subscribe(topic, self.fleet.offer)
        telemetry = settings.telemetry
        self.telemetry = Telemetry(
            open_source(telemetry.source, telemetry.sysfs_root),
            interval_s=telemetry.interval_s,
            history_s=telemetry.history_s,
            bus=self.bus,
            thermal=ThermalGuard(
                telemetry.thermal_warn_c, telemetry.thermal_critical_c, telemetry.hysteresis_c
            ),
            mqtt_interval_s=telemetry.mqtt_interval_s if settings.mqtt is not None else 0.0,
        )
        self.history: HistorySampler | None = None
        if settings.history.enabled:
            self.history = HistorySampler(
                self.dataplane.statistics,
                self.telemetry,
                settings.history,
                settings.state_directory / HISTORY_FILE_NAME,
            )
        self.alerts: AlertEvaluator | None = None
        if settings.alerts.enabled:
            # Subscribed from here on, like MQTT: the first loads' failures alert too.
            self.alerts = AlertEvaluator(
                self.bus,
                build_rules(
                    settings.alerts,
                    int(settings.mqtt.spool_max_mb * 1024 * 1024) if settings.mqtt else None,
                    lambda name, version: version in self.registry.statuses(name),
                ),
                settings.alerts.interval_s,
                telemetry=self.telemetry,
                mqtt=self.mqtt,
            )
        self.dashboard: DashboardServer | None = None
        if settings.dashboard.enabled:
            self.dashboard = DashboardServer.build(
                DashboardDeps(
                    dataplane=self.dataplane,
                    repository_control=self.repository_control,
                    registry=self.registry,
                    bus=self.bus,
                    control_mode=settings.model_control_mode,
                    streams=self.streams,
                    telemetry=self.telemetry,
                    mqtt=self.mqtt,
                    frames=self.streams.latest_frames,
                    stream_health=self.streams,
                    logs=log_ring,
                    history=self.history,
                    alerts=self.alerts,
                ),
                settings.dashboard,
                settings.host,
            )
        self.poller: RepositoryPoller | None = None
        self.metrics: MetricsServer | None = None
        """Built in ``run``, so it sees every source ``__init__`` made; stays
        None with ``allow_metrics`` false."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set by a stop or reload request, or by the end of the initial load."""
        self._loaded = threading.Event()
        self._reload_requested = threading.Event()
        self._reloading = False
        self._initial_load_error: BaseException | None = None

    def request_stop(self, *_: object) -> None:
        self._stop.set()
        self._wake.set()

    def request_reload(self, *_: object) -> None:
        """The SIGHUP handler: only a flag; the main thread reloads once the
        initial load is done (a SIGHUP during it waits for it)."""
        self._reload_requested.set()
        self._wake.set()

    @property
    def reload_pending(self) -> bool:
        """True from a reload request until the main thread has handled it."""
        return self._reload_requested.is_set() or self._reloading

    def _start_metrics(self) -> None:
        """Bind the metrics port unless ``allow_metrics`` is false: then no
        socket and no collector exist, and readiness waits for nothing here.
        The log line says when metrics are off or reachable from this device
        only (``tests/daemon_process.py`` reads it)."""
        settings = self.settings
        if not settings.allow_metrics:
            log.info("Metrics service off (allow_metrics false): no metrics port bound")
            return
        address = settings.resolved_metrics_address
        self.metrics = MetricsServer(
            MetricsCollector(
                self.dataplane,
                self.repository_control,
                self.telemetry,
                self.streams,
                self.mqtt,
                self.bus,
                gpu=settings.allow_gpu_metrics,
                cpu=settings.allow_cpu_metrics,
                rollouts=self.rollouts,
                response_cache=self.response_cache,
                fleet=self.fleet_figures,
                alerts=self.alerts,
            ),
            address,
            settings.metrics_port,
        )
        port = self.metrics.start()
        local = " (loopback only: not reachable from other machines)"
        log.info(
            "Metrics service listening on %s:%d%s",
            address,
            port,
            local if _is_loopback(address) else "",
        )

    def run(self) -> int:
        settings = self.settings
        if self.mqtt is not None:
            self.mqtt.start()
            log.info(
                "MQTT: publishing to %s (spool %s)",
                self.mqtt.broker,
                settings.mqtt.resolved_spool_path,
            )
        self.telemetry.start()
        if self.history is not None:
            self.history.load()
            self.history.start()
        if self.alerts is not None:
            self.alerts.start()
        if self.response_cache is not None:
            log.info(
                "Response cache: local, %d bytes, for models with response_cache enabled",
                self.response_cache.size_bytes,
            )
        self._start_metrics()
        port = self.http.start()
        log.info("HTTP service listening on %s:%d", settings.host, port)
        log.info("HTTP access: %s", self.access.describe())
        try:
            grpc_port = self.grpc.start()
        except OSError:
            self.http.stop(0)
            raise
        log.info("GRPC service listening on %s:%d", settings.host, grpc_port)
        self._start_dashboard()
        mode = settings.model_control_mode
        self.rollouts.recover()
        self.rollouts.start_thread()
        loader = threading.Thread(target=self._load_initial, name="initial-load", daemon=True)
        loader.start()
        while not (self._stop.is_set() or self._loaded.is_set()):
            self._wake.wait()
            self._wake.clear()
        if self._stop.is_set():
            log.info("stop requested while loading the models")
            self.shutdown()
            return 0
        if self._initial_load_error is not None:
            raise self._initial_load_error
        if mode == "poll":
            self.poller = RepositoryPoller(
                self.manager, settings.model_repository, settings.repository_poll_secs
            )
            self.poller.prime()
            self.poller.start()
        if self.fleet is not None:
            self.fleet.start()
            log.info(
                "Fleet: device '%s' in group '%s'",
                self.settings.mqtt.resolved_device_id,
                self.settings.fleet.group,
            )
        self.dataplane.mark_started()
        self.streams.start()
        log.info("edgebox ready (model control mode '%s')", mode)
        notify("READY=1")
        interval = watchdog_interval_s()
        due = time.monotonic() + interval if interval else None
        while not self._stop.is_set():
            if self._reload_requested.is_set():
                self._reloading = True
                self._reload_requested.clear()
                try:
                    self.reload()
                finally:
                    self._reloading = False
            if due is not None and time.monotonic() >= due:
                due = time.monotonic() + interval
                if self.healthy():
                    notify("WATCHDOG=1")
                else:
                    log.error(
                        "HTTP accept loop, gRPC server or repository poller has died; "
                        "not feeding the watchdog"
                    )
            self._wake.wait(None if due is None else max(0.0, due - time.monotonic()))
            self._wake.clear()
        self.shutdown()
        return 0

    def reload(self) -> bool:
        """SIGHUP, on the main thread: read the settings again, log every
        changed field that needs a restart in one warning, apply the others
        and log a summary (``live_reload``). Bad settings (or a failure
        applying them) are logged and the daemon keeps running on what it
        has; never raises. True when new settings were applied."""
        if self._reread is None:
            log.warning(
                "SIGHUP: these settings were not read from a configuration; nothing to reload"
            )
            return False
        notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            applied = reload_settings(self.settings, self._reread, self)
            if applied is None:
                return False
            self.settings = applied
            return True
        finally:
            notify("READY=1")

    def _start_dashboard(self) -> None:
        """The dashboard is a window on the daemon, not part of serving: a
        port it cannot bind is logged and the daemon serves without it."""
        if self.dashboard is None:
            return
        settings = self.settings
        try:
            port = self.dashboard.start()
        except OSError as exc:
            log.error(
                "Dashboard: cannot listen on %s:%d (%s); serving without the dashboard",
                settings.host,
                settings.dashboard.port,
                exc.strerror or exc,
            )
            self.dashboard = None
            return
        log.info("Dashboard listening on %s:%d", settings.host, port)

    def _load_initial(self) -> None:
        """The initial-load thread: what the control mode loads at start. A
        daemon thread, so a load stuck in a backend cannot keep the process
        alive after shutdown."""
        try:
            if self.settings.model_control_mode == "explicit":
                names = list(self.settings.load_model)
                self.manager.load_models(None if "*" in names else names)
            else:
                self.manager.load_models()
        except BaseException as exc:
            self._initial_load_error = exc
        finally:
            self._loaded.set()
            self._wake.set()

    def healthy(self) -> bool:
        """What the systemd watchdog vouches for: requests are still accepted and
        (in poll mode) the repository is still followed."""
        poller_ok = self.poller is None or self.poller.alive
        return self.http.accepting and self.grpc.accepting and poller_ok

    def shutdown(self) -> None:
        """Stop within ``exit_timeout_secs`` in all: loads in progress are
        cancelled, streams stop (their frame in flight finishes), then in-flight
        requests finish (requests a decoupled model still holds at half the
        budget fail), then shared-memory regions are unmapped, then models
        are unloaded (python models' ``finalize`` runs)."""
        log.info("shutting down: finishing in-flight requests")
        notify("STOPPING=1")
        deadline = time.monotonic() + self.settings.exit_timeout_secs
        self.manager.stop_loading()
        if self.fleet is not None:
            self.fleet.stop(min(5.0, self.settings.exit_timeout_secs / 4))
        if self.dashboard is not None and not self.dashboard.stop(
            min(2.0, self.settings.exit_timeout_secs / 4)
        ):
            log.warning("Dashboard: a request did not finish in time; continuing the shutdown")
        # Streams get at most half the budget, so a camera read that hangs
        # cannot take the time HTTP requests need to finish.
        if not self.streams.stop(self.settings.exit_timeout_secs / 2):
            log.warning("a stream did not stop in time; continuing the shutdown")
        self.dataplane.mark_stopping()
        # A decoupled model may hold a request for ever: past half the budget it fails.
        abandon = threading.Timer(
            self.settings.exit_timeout_secs / 2,
            self.dataplane.abandon_held,
            ("the server is shutting down",),
        )
        abandon.daemon = True
        abandon.start()
        if self.poller is not None:
            self.poller.stop(max(0.0, deadline - time.monotonic()))
        self.grpc.begin_stop(max(0.0, deadline - time.monotonic()))
        self.http.stop(max(0.0, deadline - time.monotonic()))
        self.grpc.stop(max(0.0, deadline - time.monotonic()))
        if self.metrics is not None:
            self.metrics.stop()
        self.shared_memory.close()
        if not self.manager.unload_all(max(0.0, deadline - time.monotonic())):
            log.warning("exit timeout reached with requests still running; exiting anyway")
        abandon.cancel()
        if not self.telemetry.stop(1.0):
            log.warning("telemetry: a read is still running; not waiting for it")
        if self.history is not None and not self.history.stop(1.0):
            log.warning("history: the sampler did not stop in time; its last minutes are not saved")
        if self.alerts is not None and not self.alerts.stop(1.0):
            log.warning("alerts: a judgement is still running; not waiting for it")
        if self.mqtt is not None and not self.mqtt.stop(max(1.0, deadline - time.monotonic())):
            log.warning("MQTT: the publisher did not stop in time; unsent messages stay spooled")
        log.info("stopped")

    def _stream_states(self) -> dict[str, str]:
        return {status.name: status.state.value for status in self.streams.status()}


def run_daemon(settings: Settings, reread: Callable[[], Settings] | None = None) -> int:
    """``reread``: see ``Daemon``; the CLI passes one that redoes its layering."""
    log_ring = LogRing().install()
    tuned = tune_malloc()
    if tuned:
        log.debug("malloc: raised %s (edgebox/malloc_tuning.py)", ", ".join(tuned))
    _warn_if_password_hash_exposed(settings)
    daemon = Daemon(settings, reread, catch_faults=True, log_ring=log_ring)
    signal.signal(signal.SIGTERM, daemon.request_stop)
    signal.signal(signal.SIGINT, daemon.request_stop)
    signal.signal(signal.SIGHUP, daemon.request_reload)
    return daemon.run()


def _warn_if_password_hash_exposed(settings: Settings) -> None:
    """A hash can be attacked offline: say so at start when the settings file
    holding it is readable by more than its owner and the daemon's group."""
    source = settings.sources.get("dashboard.password_hash")
    if not settings.dashboard.password_hash or not source or not Path(source).is_file():
        return  # from a flag or the environment: no file to judge
    problem = exposure(Path(source))
    if problem is not None:
        log.warning("Dashboard: %s holds the password hash but %s", source, problem)


def _is_loopback(address: str) -> bool:
    """True for ``localhost`` and loopback IPs (``127.0.0.0/8``, ``::1``)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
