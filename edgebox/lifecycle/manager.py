"""Loads, swaps and retires model versions; the only writer of the registry.

Order of a (re)load, per Triton's lifecycle: read the config, pick the versions
its policy allows, load each one fully (all instances) while the old ones keep
serving, publish it, and only then retire what it replaces. A retired version
finishes its in-flight requests on a background thread before it is closed, so
no control operation waits on a slow request and no request loses its model.
A failed load leaves what was serving in place and records the reason.

Locking: operations on one model run one at a time; operations on different
models run side by side, so a slow load (a long warm-up, a python model's
``initialize``) never holds up another model's load or unload, nor shutdown.
An unload of a model, and shutdown, cancel its loads in progress: a warm-up
stops before its next request, and a version built meanwhile is closed rather
than published. What runs inside a backend (an ``initialize`` that never
returns) cannot be interrupted; shutdown leaves such a load behind at its
deadline, and the load, if it ever ends, publishes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from edgebox.backends import BackendCatalog
from edgebox.backends.base import InferFunction, ModelContext
from edgebox.errors import ConfigError, EdgeboxError, InvalidArgument, NotFound, Unavailable
from edgebox.lifecycle.dependencies import (
    composing_models,
    cycle_reason,
    dependents_of,
    find_cycle,
    load_order,
)
from edgebox.lifecycle.limits import InstanceLedger, LoadLimits, config_problem
from edgebox.lifecycle.registry import ModelRegistry, ServedModel
from edgebox.lifecycle.states import ModelState
from edgebox.lifecycle.warmup import run_warmup
from edgebox.repository.config import ModelConfig, backend_of, read_model_config
from edgebox.repository.contained_path import (
    check_model_name,
    read_regular_file,
    resolve_inside,
)
from edgebox.repository.layout import ModelFolder, scan_model, scan_repository
from edgebox.repository.version_policy import missing_specific_versions, select_versions
from edgebox.scheduling.direct import DirectScheduler
from edgebox.scheduling.dynamic_batcher import DynamicBatcher
from edgebox.scheduling.ensemble_scheduler import EnsembleScheduler
from edgebox.scheduling.instance_pool import InstancePool, instance_specs
from edgebox.signature import ModelSignature

log = logging.getLogger(__name__)

_REPLACED = "replaced by a reload"
_FOLDER_REMOVED = "version folder removed"
MAX_LABEL_FILE_BYTES = 16 * 1024 * 1024
"""Largest ``label_filename`` read (ImageNet-21k's labels take under 1 MB)."""


_SHUTTING_DOWN = "server shutting down"


class _Load:
    """One load in progress. An unload of its model, or shutdown, sets
    ``reason``; the loading thread sees it at its next checkpoint."""

    __slots__ = ("name", "reason", "version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.reason = ""
        self.version: int | None = None
        """The version being built, whose state a cancellation turns UNLOADING."""


class LifecycleManager:
    """Control operations on one model run one at a time, those on different
    models side by side (see the module docstring); requests never wait on
    either. Thread-safe: the HTTP threads, the poller and the startup loader
    all call in."""

    def __init__(
        self,
        repository: Path,
        registry: ModelRegistry,
        catalog: BackendCatalog,
        infer: InferFunction,
        gpu_ids: list[int] | None = None,
        limits: LoadLimits | None = None,
    ) -> None:
        self.repository = repository
        self._registry = registry
        self._catalog = catalog
        self._infer = infer
        self._gpu_ids = gpu_ids or []
        self._limits = limits or LoadLimits()
        self._instances = InstanceLedger(self._limits.max_instances_total)
        self._lock = threading.Lock()
        """Held only for bookkeeping, never across a load: guards the fields
        below and ``_busy``/``_loads``."""
        self._changed = threading.Condition(self._lock)
        """Notified when a model's operation ends or a load is cancelled."""
        self._busy: set[str] = set()
        """Models with a control operation running."""
        self._loads: dict[str, list[_Load]] = {}
        self._closing = ""
        """Why no load may start any more (shutdown), or empty."""
        self._held: dict[int, int] = {}
        """id(ServedModel) -> its instance ledger ticket, until it is closed."""
        self._configs: dict[str, ModelConfig] = {}
        self._failed: dict[tuple[str, int], tuple[tuple, str]] = {}
        """(model, version) -> (source, reason) of a load that failed: not retried
        until its config or files change, unless a caller insists."""
        self._retirees: list[threading.Thread] = []

    # -- operations -------------------------------------------------------

    def load_models(self, names: list[str] | None = None) -> None:
        """Load the named models (all in the repository if None), composing
        models before the ensembles that use them. Failures are recorded per
        model, never raised: every other model still loads. Shutdown stops it
        before the next model."""
        snapshot = scan_repository(self.repository)
        wanted = list(snapshot.models) if names is None else names
        configs: dict[str, ModelConfig | None] = {}
        for name in wanted:
            try:
                configs[name] = self._read_config(name)
            except (NotFound, InvalidArgument) as exc:
                log.error("cannot load: %s", exc)
                configs[name] = None
            except EdgeboxError:
                configs[name] = None
        order, cyclic = load_order(configs)
        for name, reason in cyclic.items():
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, reason)
        for name in order:
            if self._closing:
                return
            if configs.get(name) is None:
                continue
            try:
                self._run_load(name, configs[name], snapshot.models.get(name))
            except EdgeboxError:
                pass

    def load_model(
        self,
        name: str,
        config: ModelConfig | None = None,
        folder: ModelFolder | None = None,
        retry_failed: bool = False,
    ) -> None:
        """Load or reload one model (the repository extension's ``load``, or a
        change the poller saw). Versions whose config and files are unchanged
        keep serving untouched. ``folder`` limits which version folders exist
        (the poller leaves out those still being copied). A version that failed
        with the same config and files is not tried again unless
        ``retry_failed`` (an explicit load request) says so.

        Raises EdgeboxError when the model ends up with no ready version, so the
        caller can report it; what was serving before keeps serving. A
        ``config`` given by the caller (a load request's override) that forms
        an ensemble cycle or asks for more than the limits is refused with
        InvalidArgument before anything changes.
        """
        if self._closing:
            raise Unavailable(f"model '{name}': not loaded: {self._closing}")
        if config is None:
            config = self._read_config(name)
        else:
            with self._lock:
                problem = self._config_problem(name, config)
            if problem is not None:
                raise InvalidArgument(problem)
        try:
            self._run_load(name, config, folder, retry_failed)
        finally:
            if self._registry.served_versions(name):
                self._retry_dependents(name)

    def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """Unload the model (and the ensembles using it, if asked), first
        stopping any load of it in progress; other models are not waited on."""
        if name not in self._registry.model_names():
            raise NotFound(f"unknown model '{name}'")
        names = [name]
        if unload_dependents:
            names += dependents_of(name, self._configs_now())
        for model in names:
            self._cancel_loads(model, "unloaded")
            with self._operating(model):
                self._unload(model, "unloaded")

    def forget_model(self, name: str) -> None:
        """The model's folder is gone: unload it and drop its states."""
        self._cancel_loads(name, "model folder removed")
        with self._operating(name):
            self._unload(name, "model folder removed")
            for version in list(self._registry.statuses(name)):
                self._registry.clear_status(name, version)
            with self._lock:
                self._configs.pop(name, None)

    def stop_loading(self, reason: str = _SHUTTING_DOWN) -> None:
        """No load starts from now on, and those in progress stop at their next
        checkpoint (before a warm-up request or an instance, before publishing):
        shutdown's first step, so that no load holds it up."""
        with self._lock:
            self._closing = reason
            for loads in self._loads.values():
                for load in loads:
                    self._cancel(load, reason)
            self._changed.notify_all()

    def unload_all(self, timeout_s: float | None = None) -> bool:
        """Unload everything and wait (up to ``timeout_s`` in all) for in-flight
        requests to finish and instances to close: the shutdown path. Loads in
        progress are stopped first; one that does not stop by the deadline
        (stuck in a backend) is left behind. False if anything was still
        running at the deadline."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.stop_loading()
        left: list[str] = []
        for name in self._registry.model_names():
            if self._enter(name, timeout_s=0):
                self._unload_and_leave(name, _SHUTTING_DOWN)
            else:
                left.append(name)
        stuck = False
        for name in left:
            if self._enter(name, timeout_s=_remaining(deadline)):
                self._unload_and_leave(name, _SHUTTING_DOWN)
            else:
                log.warning("model '%s' is still loading at the exit deadline; left behind", name)
                stuck = True
        return self.wait_retired(_remaining(deadline)) and not stuck

    def wait_retired(self, timeout_s: float | None = None) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            retirees = list(self._retirees)
        for thread in retirees:
            thread.join(_remaining(deadline))
        with self._lock:
            self._retirees = [t for t in self._retirees if t.is_alive()]
            return not self._retirees

    def config_of(self, name: str) -> ModelConfig | None:
        return self._configs.get(name)

    # -- internals: who may operate on a model ----------------------------

    def _enter(self, name: str, load: _Load | None = None, timeout_s: float | None = None) -> bool:
        """Become the one operation on ``name``, waiting (up to ``timeout_s``)
        for the one before; False at the timeout. A ``load`` cancelled while
        waiting raises instead of going on."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._changed:
            while name in self._busy:
                if load is not None and self._cancelled(load):
                    raise Unavailable(f"model '{name}': load cancelled: {self._cancelled(load)}")
                remaining = _remaining(deadline)
                if remaining == 0.0:
                    return False
                self._changed.wait(remaining)
            self._busy.add(name)
            return True

    def _leave(self, name: str) -> None:
        with self._changed:
            self._busy.discard(name)
            self._changed.notify_all()

    @contextlib.contextmanager
    def _operating(self, name: str, load: _Load | None = None) -> Iterator[None]:
        self._enter(name, load)
        try:
            yield
        finally:
            self._leave(name)

    def _unload_and_leave(self, name: str, reason: str) -> None:
        try:
            self._unload(name, reason)
        finally:
            self._leave(name)

    def _run_load(
        self,
        name: str,
        config: ModelConfig,
        folder: ModelFolder | None,
        retry_failed: bool = False,
    ) -> None:
        """``_load`` as the one operation on ``name``, cancellable throughout."""
        load = _Load(name)
        with self._lock:
            if self._closing:
                raise Unavailable(f"model '{name}': not loaded: {self._closing}")
            self._loads.setdefault(name, []).append(load)
        try:
            with self._operating(name, load):
                self._load(name, config, folder, retry_failed, load)
        finally:
            with self._lock:
                loads = self._loads.get(name, [])
                loads.remove(load)
                if not loads:
                    self._loads.pop(name, None)

    def _cancel_loads(self, name: str, reason: str) -> None:
        """Stop the loads of ``name`` in progress now (not those that start
        later), so an unload never waits out a warm-up."""
        with self._lock:
            for load in self._loads.get(name, []):
                self._cancel(load, reason)
            self._changed.notify_all()

    def _cancel(self, load: _Load, reason: str) -> None:
        """Under ``_lock``. The version being built shows UNLOADING at once."""
        if load.reason:
            return
        load.reason = reason
        if load.version is not None:
            self._registry.set_status(load.name, load.version, ModelState.UNLOADING, reason)

    def _cancelled(self, load: _Load) -> str:
        """Why ``load`` must stop, or empty."""
        return load.reason or self._closing

    def _check_cancelled(self, load: _Load, where: str) -> None:
        reason = self._cancelled(load)
        if reason:
            raise Unavailable(f"{where}: load cancelled: {reason}")

    def _configs_now(self) -> dict[str, ModelConfig]:
        with self._lock:
            return dict(self._configs)

    def _config_problem(self, name: str, config: ModelConfig) -> str | None:
        """Under ``_lock``: why ``config`` may not load at all (an ensemble
        cycle through the configs known now, or more than the limits)."""
        cycle = find_cycle(name, config, self._configs)
        if cycle is not None:
            return cycle_reason(cycle)
        return config_problem(name, config, self._limits, self._gpu_ids)

    # -- internals: loading ---------------------------------------------------

    def _read_config(self, name: str) -> ModelConfig:
        check_model_name(name)
        model_dir = self.repository / name
        if not model_dir.is_dir():
            # The repository's location is the device's business, not a client's.
            raise NotFound(f"no model folder '{name}' in the model repository")
        try:
            return read_model_config(model_dir)
        except ConfigError as exc:
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, str(exc))
            raise

    def _load(
        self,
        name: str,
        config: ModelConfig,
        folder: ModelFolder | None,
        retry_failed: bool,
        load: _Load,
    ) -> None:
        """Load ``config``'s versions; the caller is the one operation on ``name``."""
        with self._lock:
            problem = self._config_problem(name, config)
            if problem is None:
                self._configs[name] = config
        if problem is not None:
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, problem)
            raise InvalidArgument(problem)
        self._registry.clear_status(name, None)
        if folder is None:
            folder = scan_model(self.repository / name)
        available = list(folder.versions)
        digest = config.SerializeToString(deterministic=True)
        wanted = select_versions(config.version_policy, available)
        for missing in missing_specific_versions(config.version_policy, available):
            self._registry.set_status(
                name,
                missing,
                ModelState.UNAVAILABLE,
                f"version folder '{self.repository / name / str(missing)}' not found "
                "(listed in version_policy specific)",
            )
        if not wanted:
            reason = (
                f"no version folder in '{folder.path}' is selected by its version_policy "
                f"(found: {sorted(available) or 'none'})"
            )
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, reason)
            self._unload(name, "unloaded")
            raise Unavailable(f"model '{name}': {reason}")

        failures: list[str] = []
        serving = self._registry.served_versions(name)
        for version in wanted:
            source = (digest, folder.versions[version].fingerprint)
            current = serving.get(version)
            if current is not None and current.source == source:
                continue
            failed = self._failed.get((name, version))
            if failed is not None and failed[0] == source and not retry_failed:
                failures.append(failed[1])
                continue
            replacing = [
                old for number, old in serving.items() if number == version or number not in wanted
            ]
            try:
                served = self._load_version(name, version, config, load, replacing)
                served.source = source
                previous = self._publish_unless_cancelled(served, load)
            except EdgeboxError as exc:
                if self._cancelled(load):
                    # An unload or shutdown follows; nothing to record or retire.
                    raise
                self._failed[(name, version)] = (source, str(exc))
                failures.append(str(exc))
                if version in self._registry.served_versions(name):
                    self._registry.set_status(
                        name,
                        version,
                        ModelState.READY,
                        f"reload failed, still serving the previous load: {exc}",
                    )
                continue
            self._failed.pop((name, version), None)
            if previous is not None:
                self._retire(previous, _REPLACED)

        leaving: dict[int, str] = {}
        for version in self._registry.served_versions(name):
            if version not in available:
                leaving[version] = _FOLDER_REMOVED
            elif version not in wanted and not failures:
                leaving[version] = "unloaded (not selected by version_policy)"
            elif version not in wanted:
                # A bad new version never takes down a good one: what served
                # before keeps serving until every wanted version has loaded.
                self._registry.set_status(
                    name,
                    version,
                    ModelState.READY,
                    "still serving: a version selected by version_policy failed to load",
                )
        self._retire_versions(name, leaving)
        for version in self._registry.statuses(name):
            if version is not None and version not in available and version not in leaving:
                self._registry.clear_status(name, version)
        with self._lock:
            for key in [k for k in self._failed if k[0] == name and k[1] not in available]:
                del self._failed[key]
        if failures:
            still = sorted(self._registry.served_versions(name))
            serving_text = f" (still serving version(s) {still})" if still else ""
            raise Unavailable(f"model '{name}': {failures[0]}{serving_text}")

    def _load_version(
        self,
        name: str,
        version: int,
        config: ModelConfig,
        load: _Load,
        replacing: list[ServedModel],
    ) -> ServedModel:
        """Build a fully loaded version, or raise with the reason recorded.
        ``replacing``: the served versions this load retires once it succeeds."""
        version_config = ModelConfig()
        version_config.CopyFrom(config)
        context = ModelContext(
            name=name,
            version=version,
            config=version_config,
            model_dir=self.repository / name,
            version_dir=self.repository / name / str(version),
            infer=self._infer,
            max_threads_per_instance=self._limits.max_threads_per_instance,
        )
        with self._lock:
            cancelled = self._cancelled(load)
            if not cancelled:
                load.version = version
                self._registry.set_status(name, version, ModelState.LOADING)
        if cancelled:
            raise Unavailable(f"{context.where}: load cancelled: {cancelled}")
        try:
            served = self._build(context, load, replacing)
        except EdgeboxError as exc:
            self._registry.set_status(name, version, ModelState.UNAVAILABLE, _reason(exc, context))
            raise
        except Exception as exc:
            log.exception("%s: unexpected error while loading", context.where)
            error = Unavailable(f"{context.where}: {type(exc).__name__}: {exc}")
            self._registry.set_status(name, version, ModelState.UNAVAILABLE, str(error))
            raise error from None
        context.health = lambda ready, reason: self._instance_health(served, ready, reason)
        return served

    def _instance_health(self, served: ServedModel, ready: bool, reason: str) -> None:
        """The backend's instances failed or came back on their own (an isolated
        python model's process crashed, or was restarted): shown as the version's
        state while it is the one serving. Called from the backend's thread; it
        takes no control lock, so it never waits on a load or unload."""
        if self._registry.served_versions(served.name).get(served.version) is not served:
            return
        state = ModelState.READY if ready else ModelState.UNAVAILABLE
        self._registry.set_status(
            served.name, served.version, state, reason or "; ".join(served.notes)
        )

    def _publish_unless_cancelled(self, served: ServedModel, load: _Load) -> ServedModel | None:
        """Make ``served`` take traffic and return what it replaces, unless the
        load was cancelled meanwhile: then it is closed unpublished. One step
        under ``_lock``, so a shutdown that gave up waiting for this load never
        sees it published afterwards."""
        with self._lock:
            reason = self._cancelled(load)
            if not reason:
                return self._registry.publish(served)
        error = Unavailable(f"{served.where}: load cancelled: {reason}")
        self._close(served)
        self._registry.set_status(served.name, served.version, ModelState.UNAVAILABLE, str(error))
        raise error

    def _close(self, served: ServedModel) -> None:
        """Close a version no request can reach any more and give back the
        instances it held against ``max_instances_total``."""
        try:
            served.close()
        except Exception:
            log.exception("%s: closing failed", served.where)
        finally:
            self._release_instances(served)

    def _release_instances(self, served: ServedModel) -> None:
        with self._lock:
            ticket = self._held.pop(id(served), None)
        self._instances.release(ticket)

    def _build(
        self, context: ModelContext, load: _Load, replacing: list[ServedModel]
    ) -> ServedModel:
        config = context.config
        backend_name = backend_of(config)
        if backend_name == "ensemble":
            self._check_steps_ready(context)
            signature = ModelSignature.from_config(config)
            scheduler = EnsembleScheduler(config, signature, self._infer, context.where)
            return ServedModel(context.name, context.version, config, signature, scheduler)
        if not context.version_dir.is_dir():
            raise Unavailable(f"{context.where}: version folder '{context.version_dir}' not found")
        backend = self._catalog.get(backend_name)
        backend.complete_config(context)
        instances = []
        specs = instance_specs(config, self._gpu_ids)
        with self._lock:
            replaced = [self._held[id(old)] for old in replacing if id(old) in self._held]
        ticket = None
        try:
            ticket = self._instances.reserve(context.where, len(specs), replaced)
            signature = ModelSignature.from_config(config)
            labels = _read_labels(context)
            for spec in specs:
                self._check_cancelled(load, context.where)
                instances.append(backend.load_instance(context, spec))
        except BaseException:
            InstancePool(instances).close()
            backend.unload(context)
            self._instances.release(ticket)
            raise
        pool = InstancePool(instances)
        if config.HasField("dynamic_batching") and config.max_batch_size > 0:
            scheduler = DynamicBatcher(pool, signature, config, context.where)
        else:
            if config.HasField("dynamic_batching"):
                context.notes.append("dynamic_batching ignored: max_batch_size is 0")
            scheduler = DirectScheduler(pool, signature, context.where)
        try:
            run_warmup(
                scheduler,
                config,
                signature,
                context.model_dir,
                context.where,
                self._limits.max_warmup_requests,
                lambda: self._cancelled(load),
            )
        except BaseException:
            scheduler.close()
            backend.unload(context)
            self._instances.release(ticket)
            raise
        served = ServedModel(
            context.name,
            context.version,
            config,
            signature,
            scheduler,
            labels=labels,
            notes=context.notes,
            on_close=lambda: backend.unload(context),
        )
        with self._lock:
            self._held[id(served)] = ticket
        return served

    def _check_steps_ready(self, context: ModelContext) -> None:
        for step in context.config.ensemble_scheduling.step:
            version = str(step.model_version) if step.model_version >= 0 else ""
            try:
                self._registry.get(step.model_name, version)
            except EdgeboxError as exc:
                raise Unavailable(
                    f"{context.where}: ensemble step model '{step.model_name}' "
                    f"is not available: {exc}"
                ) from None

    def _retry_dependents(self, name: str) -> None:
        """Ensembles that could not load while ``name`` was missing get another
        try once it serves; their own files did not change, so nothing else
        would retry them."""
        configs = self._configs_now()
        for dependent in dependents_of(name, configs):
            config = configs.get(dependent)
            if config is None or self._registry.served_versions(dependent):
                continue
            try:
                self._run_load(dependent, config, None, retry_failed=True)
            except EdgeboxError as exc:
                log.info("model '%s' still cannot load: %s", dependent, exc)

    def _unload(self, name: str, reason: str) -> None:
        self._retire_versions(name, dict.fromkeys(self._registry.served_versions(name), reason))

    def _retire_versions(self, name: str, reasons: dict[int, str]) -> None:
        """Withdraw these versions in one step (so requests never fall back to
        another version that is leaving too), then retire each."""
        for served in self._registry.withdraw(name, list(reasons)):
            self._retire(served, reasons[served.version])

    def _retire(self, served: ServedModel, reason: str) -> None:
        """Close ``served`` once its in-flight requests finish, off this thread.

        Its state afterwards: none for a version whose folder is gone, none to
        set for one replaced by a reload, UNAVAILABLE with ``reason`` otherwise;
        never over a newer load of the same version number.
        """
        replaced = reason == _REPLACED
        if not replaced:
            self._registry.set_status(served.name, served.version, ModelState.UNLOADING, reason)

        def drain_and_close() -> None:
            served.wait_drained()
            self._close(served)
            if replaced or served.version in self._registry.served_versions(served.name):
                return
            if reason == _FOLDER_REMOVED:
                self._registry.clear_status(served.name, served.version)
            else:
                self._registry.set_status(
                    served.name, served.version, ModelState.UNAVAILABLE, reason
                )

        thread = threading.Thread(
            target=drain_and_close, name=f"retire-{served.name}-{served.version}", daemon=True
        )
        with self._lock:
            self._retirees = [t for t in self._retirees if t.is_alive()] + [thread]
        thread.start()

    def dependents(self, name: str) -> list[str]:
        return dependents_of(name, self._configs_now())

    def composing(self, name: str) -> list[str]:
        return composing_models(self._configs.get(name))


def _read_labels(context: ModelContext) -> dict[str, list[str]]:
    """Each output's ``label_filename``, which must be a regular file inside the
    model folder (after symlinks) of at most ``MAX_LABEL_FILE_BYTES``: its lines
    go back to any client through the classification extension."""
    labels: dict[str, list[str]] = {}
    for output in context.config.output:
        if output.label_filename:
            where = f"{context.where}, output '{output.name}'"
            path = resolve_inside(context.model_dir, output.label_filename, "label_filename", where)
            try:
                raw = read_regular_file(path, MAX_LABEL_FILE_BYTES)
                labels[output.name] = raw.decode("utf-8").splitlines()
            except OSError as exc:
                raise Unavailable(
                    f"{where}: cannot read label_filename '{path}': {exc.strerror}"
                ) from None
            except UnicodeDecodeError:
                raise Unavailable(f"{where}: label_filename '{path}' is not UTF-8 text") from None
            except ValueError as exc:
                raise Unavailable(f"{where}: label_filename '{path}' {exc}") from None
    return labels


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _reason(exc: EdgeboxError, context: ModelContext) -> str:
    text = str(exc)
    return text if context.where in text or "config.pbtxt" in text else f"{context.where}: {text}"
