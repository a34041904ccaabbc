"""``edgebox check``: everything a load would find wrong with a repository,
without serving it. Each problem names its file (and line for configs)."""

from __future__ import annotations

from pathlib import Path

from edgebox.backends import BackendCatalog
from edgebox.backends.base import ModelContext
from edgebox.errors import ConfigError, EdgeboxError
from edgebox.repository.config import (
    CONFIG_FILENAME,
    ModelConfig,
    backend_of,
    model_folder_config,
)
from edgebox.repository.layout import scan_repository
from edgebox.repository.version_policy import missing_specific_versions, select_versions


def check_repository(root: Path) -> list[str]:
    if not root.is_dir():
        return [f"{root}: not a folder"]
    problems: list[str] = []
    snapshot = scan_repository(root, fingerprints=False)
    if not snapshot.models:
        problems.append(f"{root}: no model folders")
    catalog = BackendCatalog()
    for folder in snapshot.models.values():
        try:
            config, config_problems = model_folder_config(folder.path)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        if config_problems:
            problems += [str(p) for p in config_problems]
            continue
        problems += _check_model(catalog, config, folder, snapshot.models)
    return problems


def _check_model(catalog: BackendCatalog, config: ModelConfig, folder, models) -> list[str]:
    config_path = folder.path / CONFIG_FILENAME
    backend_name = backend_of(config)
    if backend_name == "ensemble":
        return [
            f"{config_path}: ensemble step model '{step.model_name}' is not in the repository"
            for step in config.ensemble_scheduling.step
            if step.model_name not in models
        ]
    problems: list[str] = []
    available = list(folder.versions)
    for missing in missing_specific_versions(config.version_policy, available):
        problems.append(
            f"{config_path}: version_policy lists version {missing}, which has no folder"
        )
    wanted = select_versions(config.version_policy, available)
    if not wanted:
        problems.append(f"{folder.path}: no version folder selected by version_policy")
        return problems
    try:
        backend = catalog.get(backend_name)
    except EdgeboxError as exc:
        return [*problems, f"{config_path}: {exc}"]
    for version in wanted:
        version_config = ModelConfig()
        version_config.CopyFrom(config)
        context = ModelContext(
            config.name, version, version_config, folder.path, folder.path / str(version)
        )
        try:
            backend.complete_config(context)
        except EdgeboxError as exc:
            text = str(exc)
            problems.append(text if text.startswith("/") else f"{context.version_dir}: {text}")
        finally:
            backend.unload(context)
    return problems
