"""Loads, swaps and retires model versions; the only writer of the registry.

Order of a (re)load, per Triton's lifecycle: read the config, pick the versions
its policy allows, load each one fully (all instances, see version_loader.py)
while the old ones keep serving, publish it, and only then retire what it
replaces (retirer.py: closed once its in-flight requests finish). A failed
load leaves what was serving in place and records the reason; a version that
failed is not tried again until its config or files change (failed_loads.py).

Locking (operations.py): operations on one model run one at a time; operations
on different models run side by side, so a slow load never holds up another
model's load or unload, nor shutdown. An unload of a model, and shutdown,
cancel its loads in progress: a warm-up stops before its next request, and a
version built meanwhile is closed rather than published. What runs inside a
backend (an ``initialize`` that never returns) cannot be interrupted; shutdown
leaves such a load behind at its deadline, and the load, if it ever ends,
publishes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from edgebox.backends import BackendCatalog
from edgebox.backends.base import InferFunction, InferStreamFunction
from edgebox.errors import EdgeboxError, InvalidArgument, NotFound, Unavailable
from edgebox.lifecycle.dependencies import (
    composing_models,
    dependents_of,
    load_order,
    steps_left_unneeded,
    with_steps,
)
from edgebox.lifecycle.failed_loads import FailedLoads
from edgebox.lifecycle.limits import LoadLimits
from edgebox.lifecycle.model_configs import ModelConfigs
from edgebox.lifecycle.model_folders import ModelFolders
from edgebox.lifecycle.model_versions import ModelVersions
from edgebox.lifecycle.operations import ModelOperations, remaining_s
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.retirer import VersionRetirer
from edgebox.lifecycle.rollout.rollouts import Rollouts
from edgebox.lifecycle.states import ModelState
from edgebox.lifecycle.version_loader import LoaderSetup, VersionLoader
from edgebox.repository.config import ModelConfig
from edgebox.repository.layout import ModelFolder, scan_model, scan_repository
from edgebox.repository.rollback import roll_back
from edgebox.scheduling.rate_limiter import RateLimiter

log = logging.getLogger(__name__)

_SHUTTING_DOWN = "server shutting down"


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
        infer_stream: InferStreamFunction | None = None,
        rollouts: Rollouts | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self.repository = repository
        self._registry = registry
        gpu_ids = gpu_ids or []
        limits = limits or LoadLimits()
        self._configs = ModelConfigs(repository, registry, limits, gpu_ids)
        self._operations = ModelOperations(registry)
        self._versions = VersionLoader(
            LoaderSetup(repository, catalog, infer, infer_stream, gpu_ids, limits, rate_limiter),
            registry,
            self._operations,
        )
        self._retirer = VersionRetirer(registry, self._versions.close)
        self._failed = FailedLoads()
        self.rollouts = rollouts or Rollouts(registry)
        self._folders = ModelFolders(repository, registry)
        self._versions_of_model = ModelVersions(
            repository,
            registry,
            self._configs,
            self._operations,
            self._versions,
            self._retirer,
            self._failed,
            self.rollouts,
            self._folders.path,
        )
        self._lock = threading.Lock()
        """Held only for bookkeeping, never across a load: guards ``_requested``."""
        self._requested: set[str] = set()
        """Models loaded because someone named them, not only as an ensemble's
        step: ``unload_dependents`` leaves these loaded, as Triton does."""
        self.rollouts.attach(
            operate=self._operate,
            reconcile=self._reconcile,
            close=self._versions.close,
            retire=self._retirer.retire,
            park=lambda name, version: roll_back(self.repository / name, version),
        )

    # -- operations -------------------------------------------------------

    def load_models(self, names: list[str] | None = None) -> None:
        """Load the named models (all in the repository if None), composing
        models before the ensembles that use them. Failures are recorded per
        model, never raised: every other model still loads. Shutdown stops it
        before the next model."""
        snapshot = scan_repository(self.repository)
        wanted = list(snapshot.models) if names is None else list(names)
        with self._lock:
            self._requested.update(wanted)
        configs = with_steps({}, list(wanted), self._read_or_none)
        order, cyclic = load_order(configs)
        for name, reason in cyclic.items():
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, reason)
        for name in order:
            if self._operations.closing:
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
        model_dir: Path | None = None,
    ) -> None:
        """Load or reload one model (the repository extension's ``load``, or a
        change the poller saw). Versions whose config and files are unchanged
        keep serving untouched. ``folder`` limits which version folders exist
        (the poller leaves out those still being copied). A version that failed
        with the same config and files is not tried again unless
        ``retry_failed`` (an explicit load request) says so.

        ``model_dir``, with a ``config``: load from that folder instead of the
        repository's (a load request's files, written by
        ``repository/override_folders.py``); it stays the model's folder while
        something loaded from it serves. Without it the repository's folder is
        loaded, whatever an earlier load with files did (Triton 2.51 does so).

        With no ``config``, a load request's override loaded before is used
        again while the model's files are unchanged (as in Triton), else the
        folder's config is read.

        Raises EdgeboxError when the model ends up with no ready version, so the
        caller can report it; what was serving before keeps serving. A
        ``config`` given by the caller (a load request's override) that forms
        an ensemble cycle or asks for more than the limits is refused with
        InvalidArgument before anything changes.
        """
        if self._operations.closing:
            raise Unavailable(f"model '{name}': not loaded: {self._operations.closing}")
        override = config is not None and model_dir is None
        if model_dir is not None and config is None:
            raise InvalidArgument(f"model '{name}': an override folder needs a config")
        if config is None:
            config = self._configs.kept_override(name) or self._configs.read(name)
        else:
            problem = self._configs.problem(name, config)
            if problem is not None:
                raise InvalidArgument(problem)
        with self._lock:
            self._requested.add(name)
        files = self._configs.files_now(name) if override else None
        if folder is None and (model_dir or self._folders.override(name)):
            folder = scan_model(model_dir or self.repository / name)
        self._load_missing_steps(name, config)
        try:
            self._run_load(name, config, folder, retry_failed)
            if files is not None:
                self._configs.keep_override(name, config, files)
            elif model_dir is not None:
                self._configs.drop_override(name)
        except EdgeboxError:
            self._configs.drop_override(name)
            raise
        finally:
            self._folders.loaded(name, folder.path if folder else self.repository / name)
            if self._registry.served_versions(name):
                self._retry_dependents(name)

    def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """Unload the model, first stopping any load of it in progress; other
        models are not waited on. As in Triton, the ensembles that use it go
        too (they cannot serve without it), and ``unload_dependents`` also
        unloads the models its own steps loaded that nothing else still uses
        and nobody loaded by name."""
        if name not in self._registry.model_names():
            raise NotFound(f"unknown model '{name}'")
        configs = self._configs.snapshot()
        names = [name, *self._served_dependents(name, configs)]
        if unload_dependents:
            with self._lock:
                requested = set(self._requested)
            served = {m for m in self._registry.model_names() if self._is_served(m)}
            names += steps_left_unneeded(names, configs, served, requested)
        for model in names:
            self._operations.cancel_loads(model, "unloaded")
            with self._operations.operating(model):
                self.rollouts.forget(model)
                self._retirer.retire_model(model, "unloaded")
            self._configs.drop_override(model)
            self._folders.forget(model)
            self._failed.forget(model)
            with self._lock:
                self._requested.discard(model)

    def served_dependents(self, name: str) -> list[str]:
        """The served ensembles that use ``name``, directly or through other
        ensembles: those ``unload_model(name)`` takes down with it."""
        return self._served_dependents(name, self._configs.snapshot())

    def _served_dependents(self, name: str, configs) -> list[str]:
        return [m for m in dependents_of(name, configs) if self._is_served(m)]

    def forget_model(self, name: str) -> None:
        """The model's folder is gone: unload it and drop its states."""
        self._operations.cancel_loads(name, "model folder removed")
        with self._operations.operating(name):
            self.rollouts.forget(name)
            self._retirer.retire_model(name, "model folder removed")
            for version in list(self._registry.statuses(name)):
                self._registry.clear_status(name, version)
            self._configs.forget(name)
            self._folders.forget(name)

    def stop_loading(self, reason: str = _SHUTTING_DOWN) -> None:
        """No load starts from now on, and those in progress stop at their next
        checkpoint (before a warm-up request or an instance, before publishing):
        shutdown's first step, so that no load holds it up."""
        self._operations.stop_loading(reason)

    def unload_all(self, timeout_s: float | None = None) -> bool:
        """Unload everything and wait (up to ``timeout_s`` in all) for in-flight
        requests to finish and instances to close: the shutdown path. Loads in
        progress are stopped first; one that does not stop by the deadline
        (stuck in a backend) is left behind. False if anything was still
        running at the deadline."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.stop_loading()
        self.rollouts.stop()
        left: list[str] = []
        for name in self._registry.model_names():
            if self._operations.enter(name, timeout_s=0):
                self._unload_and_leave(name, _SHUTTING_DOWN)
            else:
                left.append(name)
        stuck = False
        for name in left:
            if self._operations.enter(name, timeout_s=remaining_s(deadline)):
                self._unload_and_leave(name, _SHUTTING_DOWN)
            else:
                log.warning("model '%s' is still loading at the exit deadline; left behind", name)
                stuck = True
        drained = self.wait_retired(remaining_s(deadline)) and not stuck
        if drained:
            self.rollouts.closed_cleanly()
        return drained

    def wait_retired(self, timeout_s: float | None = None) -> bool:
        """Wait (up to ``timeout_s``) for every version retired so far to be
        closed; False if any is still draining or closing."""
        return self._retirer.wait(timeout_s)

    def override_folders_in_use(self) -> set[Path]:
        """The model folders outside the repository that a served version, or
        a model's record of where it loads from, still points at."""
        return self._folders.in_use()

    def override_folder(self, name: str) -> Path | None:
        """The folder a load request's files made for ``name``, while it serves."""
        return self._folders.override(name)

    def config_of(self, name: str) -> ModelConfig | None:
        """The config ``name`` was last asked to load with, or None."""
        return self._configs.get(name)

    # -- internals -------------------------------------------------------

    def _unload_and_leave(self, name: str, reason: str) -> None:
        """Retire ``name``'s versions, then end the operation ``unload_all``
        entered."""
        try:
            self.rollouts.forget(name)
            self._retirer.retire_model(name, reason)
        finally:
            self._operations.leave(name)

    def _run_load(
        self,
        name: str,
        config: ModelConfig,
        folder: ModelFolder | None,
        retry_failed: bool = False,
    ) -> None:
        """``_load`` as the one operation on ``name``, cancellable throughout."""
        with self._operations.loading(name) as load:
            self._versions_of_model.load(name, config, folder, retry_failed, load)

    def _operate(self, name: str, action) -> None:
        """``action`` as the one operation on ``name`` (the rollout's decisions)."""
        with self._operations.operating(name):
            action()

    def _reconcile(self, name: str) -> None:
        """Load ``name`` again with the config it has: what a rollout's
        decision changed (a version promoted, held or parked, a watch
        window over) is applied by the version policy, as a poll would."""
        config = self._configs.get(name)
        if config is None or self._operations.closing:
            return
        try:
            self._run_load(name, config, None)
        except EdgeboxError as exc:
            log.info("model '%s': after its rollout: %s", name, exc)

    def _retry_dependents(self, name: str) -> None:
        """Ensembles that could not load while ``name`` was missing get another
        try once it serves; their own files did not change, so nothing else
        would retry them. One that was unloaded on request stays unloaded."""
        configs = self._configs.snapshot()
        for dependent in dependents_of(name, configs):
            config = configs.get(dependent)
            if config is None or self._is_served(dependent) or not self._failed.any_of(dependent):
                continue
            try:
                self._run_load(dependent, config, None, retry_failed=True)
            except EdgeboxError as exc:
                log.info("model '%s' still cannot load: %s", dependent, exc)

    def _load_missing_steps(self, name: str, config: ModelConfig) -> None:
        """Load the models ``config``'s ensemble steps need that are not
        serving yet, deepest first, as Triton does for an ensemble it is asked
        to load. A step that fails is left for the ensemble's own load to
        report."""
        configs = with_steps(
            {name: config}, composing_models(config), self._read_or_none, self._is_served
        )
        order, _ = load_order(configs)
        for step in order:
            if step == name or configs.get(step) is None or self._is_served(step):
                continue
            try:
                self._run_load(step, configs[step], None)
            except EdgeboxError as exc:
                log.info("model '%s', a step of '%s', did not load: %s", step, name, exc)

    def _read_or_none(self, name: str) -> ModelConfig | None:
        """``name``'s config from its folder; None (the reason logged, or shown
        as its state) when it cannot be read."""
        try:
            return self._configs.read(name)
        except (NotFound, InvalidArgument) as exc:
            log.error("cannot load: %s", exc)
        except EdgeboxError:
            pass
        return None

    def _is_served(self, name: str) -> bool:
        return bool(self._registry.served_versions(name))
