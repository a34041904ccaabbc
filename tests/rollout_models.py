"""Python models that roll out in shadow, for the tests of the rollout
resource: a new version published beside version 1 stays in rollout for as
long as a test needs, since it waits for far more samples than any test sends."""

from __future__ import annotations

import os
from pathlib import Path

from model_fixtures import PYTHON_XY_IDENTITY, add_python_xy

LONG_SHADOW_ROLLOUT = """
parameters { key: "rollout" value { string_value: "shadow" } }
parameters { key: "rollout_samples" value { string_value: "100000" } }
"""
"""Config parameters for a shadow rollout no test traffic can finish."""


def add_shadow_model(repository: Path, name: str) -> Path:
    """Version 1 of a python model (Y = X) whose next versions roll out in
    shadow; version 1 serves at once, nothing serving before it."""
    return add_python_xy(repository, name, config_extra=LONG_SHADOW_ROLLOUT)


def publish_version(model_dir: Path, version: int, model_py: str = PYTHON_XY_IDENTITY) -> Path:
    """A new version folder, written hidden and renamed into place, so a
    polling daemon never sees half of it."""
    staging = model_dir / f".v{version}"
    staging.mkdir()
    (staging / "model.py").write_text(model_py)
    target = model_dir / str(version)
    os.rename(staging, target)
    return target
