"""One model's load: which version folders its version policy and the
rollouts allow, which of them to build, and for each whether it is
published, handed to a rollout or left failed; then which served versions
leave and why. The lifecycle manager calls it as the one operation on the
model (manager.py holds the locking and the order between models)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, Unavailable
from edgebox.lifecycle.failed_loads import FailedLoads
from edgebox.lifecycle.model_configs import ModelConfigs
from edgebox.lifecycle.operations import LoadInProgress, ModelOperations
from edgebox.lifecycle.registry import ModelRegistry, ServedModel
from edgebox.lifecycle.retirer import FOLDER_REMOVED, REPLACED, VersionRetirer
from edgebox.lifecycle.rollout.rollouts import Rollouts
from edgebox.lifecycle.states import ModelState
from edgebox.lifecycle.version_loader import VersionLoader
from edgebox.repository.config import ModelConfig
from edgebox.repository.layout import ModelFolder, scan_model
from edgebox.repository.rollout_policy import RolloutPolicy
from edgebox.repository.version_policy import missing_specific_versions, select_versions


class ModelVersions:
    """Holds no state of its own: everything it reads and writes lives in the
    parts the manager hands it."""

    def __init__(
        self,
        repository: Path,
        registry: ModelRegistry,
        configs: ModelConfigs,
        operations: ModelOperations,
        versions: VersionLoader,
        retirer: VersionRetirer,
        failed: FailedLoads,
        rollouts: Rollouts,
        model_dir: Callable[[str], Path] | None = None,
    ) -> None:
        """``model_dir``: where a model loads from when the caller names no
        folder (the repository's ``<name>`` unless a load request's files
        put it elsewhere)."""
        self.repository = repository
        self.model_dir = model_dir or (lambda name: repository / name)
        self._registry = registry
        self._configs = configs
        self._operations = operations
        self._versions = versions
        self._retirer = retirer
        self._failed = failed
        self.rollouts = rollouts

    def load(
        self,
        name: str,
        config: ModelConfig,
        folder: ModelFolder | None,
        retry_failed: bool,
        load: LoadInProgress,
    ) -> None:
        """Load ``config``'s versions; the caller is the one operation on ``name``."""
        problem = self._configs.adopt(name, config)
        if problem is not None:
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, problem)
            raise InvalidArgument(problem)
        self._registry.clear_status(name, None)
        if folder is None:
            folder = scan_model(self.model_dir(name))
        available = list(folder.versions)
        digest = config.SerializeToString(deterministic=True)
        held = self.rollouts.trials.holds(name, folder)
        for version, reason in held.items():
            self._registry.set_status(name, version, ModelState.UNAVAILABLE, reason)
        wanted = select_versions(config.version_policy, [v for v in available if v not in held])
        for missing in missing_specific_versions(config.version_policy, available):
            self._registry.set_status(
                name,
                missing,
                ModelState.UNAVAILABLE,
                f"version folder '{folder.path / str(missing)}' not found "
                "(listed in version_policy specific)",
            )
        if not wanted:
            held_text = f", held: {sorted(held)}" if held else ""
            reason = (
                f"no version folder in '{folder.path}' is selected by its version_policy "
                f"(found: {sorted(available) or 'none'}{held_text})"
            )
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, reason)
            self.rollouts.forget(name)
            self._retirer.retire_model(name, "unloaded")
            raise Unavailable(f"model '{name}': {reason}")

        failures: list[str] = []
        first_code: ErrorCode | None = None
        serving = self._registry.served_versions(name)
        policy = self.rollouts.policy_for(name, config)
        candidate, baseline = self.rollouts.plan(name, policy, folder, wanted, serving, set(held))
        sources = {v: (digest, entry.fingerprint) for v, entry in folder.versions.items()}
        active = self.rollouts.active(name)
        if active is not None and (
            candidate is None or active.key != (candidate, sources[candidate])
        ):
            self.rollouts.end(name, "superseded by a change in the model's folder or config")
            active = None
        order = list(wanted)
        if baseline is not None and baseline not in serving:
            order = [baseline] + [v for v in order if v != baseline]
        for version in order:
            source = sources[version]
            current = serving.get(version)
            if current is not None and current.source == source:
                continue
            if active is not None and version == candidate:
                continue
            reason = self._failed.reason(name, version, source)
            if reason is not None and not retry_failed:
                failures.append(reason)
                continue
            staged = version == candidate and self._registry.served_versions(name).get(baseline)
            replacing = (
                []
                if staged or version not in wanted
                else [
                    old
                    for number, old in serving.items()
                    if number == version or number not in wanted
                ]
            )
            try:
                with self.rollouts.trials.loading(name, version, folder):
                    served = self._versions.load(
                        name, version, config, load, replacing, folder.path
                    )
                served.source = source
                self.rollouts.trials.arm(served)
                if staged:
                    self._stage(served, load, staged, policy, folder.path)
                    continue
                previous = self._versions.publish(served, load)
                self.rollouts.published(served)
            except EdgeboxError as exc:
                if self._operations.cancelled(load):
                    # An unload or shutdown follows; nothing to record or retire.
                    raise
                self._failed.record(name, version, source, str(exc))
                failures.append(str(exc))
                first_code = first_code or exc.code
                if version in self._registry.served_versions(name):
                    self._registry.set_status(
                        name,
                        version,
                        ModelState.READY,
                        f"reload failed, still serving the previous load: {exc}",
                    )
                continue
            self._failed.clear(name, version)
            if previous is not None:
                self._retirer.retire(previous, REPLACED)

        kept = self.rollouts.kept(name)
        leaving: dict[int, str] = {}
        for version in self._registry.served_versions(name):
            if version not in available:
                leaving[version] = FOLDER_REMOVED
            elif version in kept:
                self._registry.set_status(name, version, ModelState.READY, kept[version])
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
        self._retirer.retire_versions(name, leaving)
        for version in self._registry.statuses(name):
            if (
                version is not None
                and version not in available
                and version not in leaving
                and not (active is not None and version == active.candidate.version)
            ):
                self._registry.clear_status(name, version)
        self._failed.forget(name, keep=available)
        if failures:
            still = sorted(self._registry.served_versions(name))
            serving_text = f" (still serving version(s) {still})" if still else ""
            # A version the config itself made impossible (a path outside the
            # folder, a limit) is the caller's mistake, as Triton's 400 says;
            # anything else (a missing or broken file) leaves it unavailable.
            refusal = InvalidArgument if first_code is ErrorCode.INVALID_ARG else Unavailable
            raise refusal(f"model '{name}': {failures[0]}{serving_text}")

    def _stage(
        self,
        served: ServedModel,
        load: LoadInProgress,
        baseline: ServedModel,
        policy: RolloutPolicy,
        model_dir: Path,
    ) -> None:
        """Hand a loaded candidate to its rollout instead of publishing it,
        unless the load was cancelled meanwhile (then it is closed)."""
        with self._operations.uncancelled(load) as reason:
            if not reason:
                self.rollouts.start(served, baseline, policy, model_dir)
                return
        self._versions.close(served)
        raise Unavailable(f"{served.where}: load cancelled: {reason}")
