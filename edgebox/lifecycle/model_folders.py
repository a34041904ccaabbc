"""Which folder each model loads from: its folder in the repository, unless
a load request's files made an override folder for it (Triton's model file
override). The record is what reloads the manager starts on its own (a
rollout's decision, an ensemble retried) read; a load request names its
folder itself, so a plain load after one with files goes back to the
repository folder, as in Triton 2.51.
"""

from __future__ import annotations

import threading
from pathlib import Path

from edgebox.lifecycle.registry import ModelRegistry


class ModelFolders:
    """Thread-safe: loads of different models update it side by side."""

    def __init__(self, repository: Path, registry: ModelRegistry) -> None:
        self.repository = repository
        self._registry = registry
        self._lock = threading.Lock()
        self._overrides: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        with self._lock:
            return self._overrides.get(name) or self.repository / name

    def override(self, name: str) -> Path | None:
        with self._lock:
            return self._overrides.get(name)

    def loaded(self, name: str, model_dir: Path) -> None:
        """A load from ``model_dir`` ended: it becomes the model's folder if
        a version loaded from it serves; a load that left nothing of its own
        serving leaves the record as it was."""
        served = self._registry.served_versions(name).values()
        if not any(s.model_dir == model_dir for s in served):
            return
        with self._lock:
            if model_dir == self.repository / name:
                self._overrides.pop(name, None)
            else:
                self._overrides[name] = model_dir

    def forget(self, name: str) -> None:
        with self._lock:
            self._overrides.pop(name, None)

    def in_use(self) -> set[Path]:
        """The override folders a record or a served version points at."""
        with self._lock:
            used = set(self._overrides.values())
        for name in self._registry.model_names():
            for served in self._registry.served_versions(name).values():
                if served.model_dir is not None:
                    used.add(served.model_dir)
        return used
