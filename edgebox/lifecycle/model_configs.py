"""The config each model was last asked to load with, by name, and the rules
a config must pass before any of its versions loads: no ensemble cycle through
the configs known now, nothing over the load limits (limits.py).

A config is recorded when its load starts, whether or not a version then
loads, so that an ensemble waiting for a composing model can be retried with
it and a later config is checked for cycles against it; it is dropped only
when the model's folder goes.

A load request's config override is also kept, with the model folder's
files as they were: a later load that names no config reloads with it while
those files are unchanged (Triton 2.51 does so); a change to any file, an
unload or the folder going drops it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from edgebox.errors import ConfigError, NotFound
from edgebox.lifecycle.dependencies import cycle_reason, find_cycle
from edgebox.lifecycle.limits import LoadLimits, config_problem
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.states import ModelState
from edgebox.repository.config import ModelConfig, read_model_config
from edgebox.repository.layout import ModelFolder, scan_model
from edgebox.repository.names import check_model_name


class ModelConfigs:
    """Thread-safe: loads of different models record and check configs side
    by side; the lock is held only for the bookkeeping, never across a load."""

    def __init__(
        self, repository: Path, registry: ModelRegistry, limits: LoadLimits, gpu_ids: list[int]
    ) -> None:
        self._repository = repository
        self._registry = registry
        self._limits = limits
        self._gpu_ids = gpu_ids
        self._lock = threading.Lock()
        self._configs: dict[str, ModelConfig] = {}
        self._overrides: dict[str, tuple[ModelConfig, tuple]] = {}

    def read(self, name: str) -> ModelConfig:
        """The model folder's ``config.pbtxt``, read now, or without one the
        config its model file implies (``model_folder_config``); nothing is recorded.
        InvalidArgument for a name that is not a single folder name, NotFound
        when there is no such folder; a ConfigError is also shown as the
        model's state, UNAVAILABLE with its text."""
        check_model_name(name)
        model_dir = self._repository / name
        if not model_dir.is_dir():
            # The repository's location is the device's business, not a client's.
            raise NotFound(f"no model folder '{name}' in the model repository")
        try:
            return read_model_config(model_dir)
        except ConfigError as exc:
            self._registry.set_status(name, None, ModelState.UNAVAILABLE, str(exc))
            raise

    def problem(self, name: str, config: ModelConfig) -> str | None:
        """Why ``config`` may not load at all, or None; records nothing."""
        with self._lock:
            return self._problem(name, config)

    def adopt(self, name: str, config: ModelConfig) -> str | None:
        """Record ``config`` as ``name``'s, unless it may not load: then the
        reason, and the config recorded before stays. One step, so two loads
        of different models can never form a cycle between them unseen."""
        with self._lock:
            problem = self._problem(name, config)
            if problem is None:
                self._configs[name] = config
            return problem

    def forget(self, name: str) -> None:
        with self._lock:
            self._configs.pop(name, None)
            self._overrides.pop(name, None)

    def files_now(self, name: str) -> tuple:
        """What the model folder's files are now, to compare with later."""
        return _files_key(scan_model(self._repository / name))

    def keep_override(self, name: str, config: ModelConfig, files: tuple) -> None:
        """``config`` (a load request's override) loaded from ``files``."""
        with self._lock:
            self._overrides[name] = (config, files)

    def drop_override(self, name: str) -> None:
        with self._lock:
            self._overrides.pop(name, None)

    def kept_override(self, name: str) -> ModelConfig | None:
        """The override a load with no config reuses: the last one kept, while
        the folder's files are as they were then; otherwise None, and it is
        dropped."""
        with self._lock:
            kept = self._overrides.get(name)
        if kept is None:
            return None
        if kept[1] != self.files_now(name):
            self.drop_override(name)
            return None
        return kept[0]

    def get(self, name: str) -> ModelConfig | None:
        return self._configs.get(name)

    def snapshot(self) -> dict[str, ModelConfig]:
        with self._lock:
            return dict(self._configs)

    def _problem(self, name: str, config: ModelConfig) -> str | None:
        """Under ``_lock``: an ensemble cycle through the configs known now,
        or more than the limits."""
        cycle = find_cycle(name, config, self._configs)
        if cycle is not None:
            return cycle_reason(cycle)
        return config_problem(name, config, self._limits, self._gpu_ids)


def _files_key(folder: ModelFolder) -> tuple:
    """The config file's and every version file's print; a version folder's
    own mtime is left out, since loading a python model writes its
    ``__pycache__`` there."""
    versions = tuple(
        (number, tuple(entry for entry in version.fingerprint if entry[0] != "."))
        for number, version in sorted(folder.versions.items())
    )
    return folder.config_fingerprint, versions
