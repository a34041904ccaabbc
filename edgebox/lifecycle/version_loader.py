"""Builds one version, fully, before it takes traffic: the backend completes
the config, every instance of ``instance_group`` loads, the scheduler is put
in front of them, labels are read and warm-up runs; then publishes it, unless
its load was cancelled meanwhile. Also closes a version the registry no longer
hands out, giving back its instances.

Runs on the loading thread, as the one operation on its model (see
operations.py), and checks for cancellation before each instance and each
warm-up request. Whatever fails or is cancelled once instances start loading
is undone here: those created so far are closed, the backend unloads the
version and its instances stop counting against ``max_instances_total``. A
version that fails, or is cancelled, once building began is left UNAVAILABLE
with the reason.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from edgebox.backends import BackendCatalog
from edgebox.backends.base import InferFunction, InferStreamFunction, ModelContext
from edgebox.errors import EdgeboxError, Unavailable
from edgebox.lifecycle.labels import read_labels
from edgebox.lifecycle.limits import InstanceLedger, LoadLimits
from edgebox.lifecycle.operations import LoadInProgress, ModelOperations
from edgebox.lifecycle.registry import ModelRegistry, ServedModel
from edgebox.lifecycle.states import ModelState
from edgebox.lifecycle.warmup import run_warmup
from edgebox.repository.config import ModelConfig, backend_of
from edgebox.repository.initial_state import initial_state_values
from edgebox.scheduling.decoupled import DecoupledScheduler
from edgebox.scheduling.direct import DirectScheduler
from edgebox.scheduling.dynamic_batcher import DynamicBatcher
from edgebox.scheduling.ensemble_scheduler import EnsembleScheduler
from edgebox.scheduling.instance_pool import InstancePool, instance_specs
from edgebox.scheduling.rate_limiter import RateLimiter
from edgebox.scheduling.sequence_batcher import SequenceBatcher
from edgebox.scheduling.sequence_controls import SequenceControls
from edgebox.signature import ModelSignature

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoaderSetup:
    """What every version is built with, fixed for the daemon's life."""

    repository: Path
    catalog: BackendCatalog
    infer: InferFunction
    """The dataplane's ``infer``, for ensembles and python models' BLS calls."""
    infer_stream: InferStreamFunction | None
    gpu_ids: list[int]
    limits: LoadLimits
    rate_limiter: RateLimiter | None = None
    """Shared by every version under ``--rate-limit execution_count``."""


class VersionLoader:
    """Builds, publishes and closes versions for the lifecycle manager.
    Thread-safe: loads of different models build side by side, and retire
    threads close what they drained."""

    def __init__(
        self, setup: LoaderSetup, registry: ModelRegistry, operations: ModelOperations
    ) -> None:
        self._repository = setup.repository
        self._infer_stream = setup.infer_stream
        self._registry = registry
        self._catalog = setup.catalog
        self._infer = setup.infer
        self._operations = operations
        self._gpu_ids = setup.gpu_ids
        self._limits = setup.limits
        self._rate_limiter = setup.rate_limiter
        self._instances = InstanceLedger(setup.limits.max_instances_total)
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}
        """id(ServedModel) -> its instance ledger ticket, until it is closed."""

    def load(
        self,
        name: str,
        version: int,
        config: ModelConfig,
        load: LoadInProgress,
        replacing: list[ServedModel],
        model_dir: Path | None = None,
    ) -> ServedModel:
        """A fully loaded version, not yet published; or EdgeboxError, with
        the reason recorded as the version's state. ``replacing``: the served
        versions this load retires once it succeeds, whose instances it does
        not count against ``max_instances_total``. ``model_dir``: the folder
        to load from, the repository's ``<name>`` when None."""
        model_dir = model_dir or self._repository / name
        version_config = ModelConfig()
        version_config.CopyFrom(config)
        context = ModelContext(
            name=name,
            version=version,
            config=version_config,
            model_dir=model_dir,
            version_dir=model_dir / str(version),
            infer=self._infer,
            infer_stream=self._infer_stream,
            max_threads_per_instance=self._limits.max_threads_per_instance,
        )
        self._operations.begin_version(load, version, context.where)
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
        served.model_dir = model_dir
        return served

    def publish(self, served: ServedModel, load: LoadInProgress) -> ServedModel | None:
        """Make ``served`` take traffic and return what it replaces, unless the
        load was cancelled meanwhile: then it is closed unpublished and
        Unavailable raised. One step that no cancellation interrupts, so a
        shutdown that gave up waiting for this load never sees it published
        afterwards."""
        with self._operations.uncancelled(load) as reason:
            if not reason:
                return self._registry.publish(served)
        error = Unavailable(f"{served.where}: load cancelled: {reason}")
        self.close(served)
        self._registry.set_status(served.name, served.version, ModelState.UNAVAILABLE, str(error))
        raise error

    def close(self, served: ServedModel) -> None:
        """Close a version no request can reach any more and give back the
        instances it held against ``max_instances_total``. Never raises: a
        failure to close is logged."""
        try:
            served.close()
        except Exception:
            log.exception("%s: closing failed", served.where)
        finally:
            with self._lock:
                ticket = self._held.pop(id(served), None)
            self._instances.release(ticket)

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

    def _build(
        self, context: ModelContext, load: LoadInProgress, replacing: list[ServedModel]
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
            labels = read_labels(context)
            controls = (
                SequenceControls.from_config(
                    config, initial_state_values(config, context.model_dir, context.where)
                )
                if config.HasField("sequence_batching")
                else None
            )
            for spec in specs:
                self._operations.check_cancelled(load, context.where)
                instances.append(backend.load_instance(context, spec))
            pool = InstancePool(instances, self._rate_limiter, specs, context.where)
        except BaseException:
            InstancePool(instances).close()
            backend.unload(context)
            self._instances.release(ticket)
            raise
        if config.model_transaction_policy.decoupled:
            if config.HasField("dynamic_batching"):
                context.notes.append("dynamic_batching ignored: the model is decoupled")
            scheduler = DecoupledScheduler(pool, signature, context.where)
        elif controls is not None:
            scheduler = SequenceBatcher(pool, signature, config, controls, context.where)
        elif config.HasField("dynamic_batching") and config.max_batch_size > 0:
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
                lambda: self._operations.cancelled(load),
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


def _reason(exc: EdgeboxError, context: ModelContext) -> str:
    text = str(exc)
    return text if context.where in text or "config.pbtxt" in text else f"{context.where}: {text}"
