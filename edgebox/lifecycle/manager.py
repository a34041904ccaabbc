"""Loads, swaps and retires model versions; the only writer of the registry.

Order of a (re)load, per Triton's lifecycle: read the config, pick the versions
its policy allows, load each one fully (all instances) while the old ones keep
serving, publish it, and only then retire what it replaces. A retired version
finishes its in-flight requests on a background thread before it is closed, so
no control operation waits on a slow request and no request loses its model.
A failed load leaves what was serving in place and records the reason.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from edgebox.backends import BackendCatalog
from edgebox.backends.base import InferFunction, ModelContext
from edgebox.errors import ConfigError, EdgeboxError, InvalidArgument, NotFound, Unavailable
from edgebox.lifecycle.dependencies import composing_models, dependents_of, load_order
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


class LifecycleManager:
    """Control operations run one at a time (one lock); requests never take it."""

    def __init__(
        self,
        repository: Path,
        registry: ModelRegistry,
        catalog: BackendCatalog,
        infer: InferFunction,
        gpu_ids: list[int] | None = None,
    ) -> None:
        self.repository = repository
        self._registry = registry
        self._catalog = catalog
        self._infer = infer
        self._gpu_ids = gpu_ids or []
        self._control = threading.RLock()
        self._configs: dict[str, ModelConfig] = {}
        self._failed: dict[tuple[str, int], tuple[tuple, str]] = {}
        """(model, version) -> (source, reason) of a load that failed: not retried
        until its config or files change, unless a caller insists."""
        self._retirees: list[threading.Thread] = []

    # -- operations -------------------------------------------------------

    def load_models(self, names: list[str] | None = None) -> None:
        """Load the named models (all in the repository if None), composing
        models before the ensembles that use them. Failures are recorded per
        model, never raised: every other model still loads."""
        with self._control:
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
                if configs.get(name) is None:
                    continue
                try:
                    self._load(name, configs[name], snapshot.models.get(name))
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
        caller can report it; what was serving before keeps serving.
        """
        with self._control:
            if config is None:
                config = self._read_config(name)
            try:
                self._load(name, config, folder, retry_failed)
            finally:
                if self._registry.served_versions(name):
                    self._retry_dependents(name)

    def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        with self._control:
            if name not in self._registry.model_names():
                raise NotFound(f"unknown model '{name}'")
            names = [name]
            if unload_dependents:
                names += dependents_of(name, self._configs)
            for model in names:
                self._unload(model, "unloaded")

    def forget_model(self, name: str) -> None:
        """The model's folder is gone: unload it and drop its states."""
        with self._control:
            self._unload(name, "model folder removed")
            for version in list(self._registry.statuses(name)):
                self._registry.clear_status(name, version)
            self._configs.pop(name, None)

    def unload_all(self, timeout_s: float | None = None) -> bool:
        """Unload everything and wait (up to ``timeout_s`` in all) for in-flight
        requests to finish and instances to close: the shutdown path. False if
        some were still running at the deadline."""
        with self._control:
            for name in self._registry.model_names():
                self._unload(name, "server shutting down")
        return self.wait_retired(timeout_s)

    def wait_retired(self, timeout_s: float | None = None) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for thread in list(self._retirees):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._retirees = [t for t in self._retirees if t.is_alive()]
        return not self._retirees

    def config_of(self, name: str) -> ModelConfig | None:
        return self._configs.get(name)

    # -- internals --------------------------------------------------------

    def _read_config(self, name: str) -> ModelConfig:
        check_model_name(name)
        model_dir = self.repository / name
        if not model_dir.is_dir():
            raise NotFound(f"no model folder '{name}' in repository '{self.repository}'")
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
        retry_failed: bool = False,
    ) -> None:
        self._registry.clear_status(name, None)
        self._configs[name] = config
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
            try:
                served = self._load_version(name, version, config)
            except EdgeboxError as exc:
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
            served.source = source
            previous = self._registry.publish(served)
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
        for key in [k for k in self._failed if k[0] == name and k[1] not in available]:
            del self._failed[key]
        if failures:
            still = sorted(self._registry.served_versions(name))
            serving_text = f" (still serving version(s) {still})" if still else ""
            raise Unavailable(f"model '{name}': {failures[0]}{serving_text}")

    def _load_version(self, name: str, version: int, config: ModelConfig) -> ServedModel:
        """Build a fully loaded version, or raise with the reason recorded."""
        version_config = ModelConfig()
        version_config.CopyFrom(config)
        context = ModelContext(
            name=name,
            version=version,
            config=version_config,
            model_dir=self.repository / name,
            version_dir=self.repository / name / str(version),
            infer=self._infer,
        )
        self._registry.set_status(name, version, ModelState.LOADING)
        try:
            served = self._build(context)
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

    def _build(self, context: ModelContext) -> ServedModel:
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
        try:
            signature = ModelSignature.from_config(config)
            labels = _read_labels(context)
            for spec in instance_specs(config, self._gpu_ids):
                instances.append(backend.load_instance(context, spec))
        except BaseException:
            InstancePool(instances).close()
            backend.unload(context)
            raise
        pool = InstancePool(instances)
        if config.HasField("dynamic_batching") and config.max_batch_size > 0:
            scheduler = DynamicBatcher(pool, signature, config, context.where)
        else:
            if config.HasField("dynamic_batching"):
                context.notes.append("dynamic_batching ignored: max_batch_size is 0")
            scheduler = DirectScheduler(pool, signature, context.where)
        try:
            run_warmup(scheduler, config, signature, context.model_dir, context.where)
        except BaseException:
            scheduler.close()
            backend.unload(context)
            raise
        return ServedModel(
            context.name,
            context.version,
            config,
            signature,
            scheduler,
            labels=labels,
            notes=context.notes,
            on_close=lambda: backend.unload(context),
        )

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
        for dependent in dependents_of(name, self._configs):
            config = self._configs.get(dependent)
            if config is None or self._registry.served_versions(dependent):
                continue
            try:
                self._load(dependent, config, None, retry_failed=True)
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
            try:
                served.close()
            except Exception:
                log.exception("%s: closing failed", served.where)
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
        self._retirees = [t for t in self._retirees if t.is_alive()] + [thread]
        thread.start()

    def dependents(self, name: str) -> list[str]:
        return dependents_of(name, self._configs)

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


def _reason(exc: EdgeboxError, context: ModelContext) -> str:
    text = str(exc)
    return text if context.where in text or "config.pbtxt" in text else f"{context.where}: {text}"
