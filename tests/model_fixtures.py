"""Builders for model repositories used by the tests: write a config and model
files into a folder the way a user would."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from scripts.build_demo_repository import build_generated_files
from scripts.onnx_builders import build_add_sub

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_REPOSITORY = REPO_ROOT / "model_repository"

ADD_SUB_CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }},
  {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }}
]
output [
  {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }},
  {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }}
]
"""

PYTHON_XY_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
"""
"""A python model taking X and returning Y, both FP32 [2]; fill in ``name``."""


def write_model(
    repository: Path, name: str, config: str, files: dict[str, str | bytes] | None = None
) -> Path:
    """``files`` maps paths inside the model folder (e.g. ``1/model.py``) to content."""
    model_dir = repository / name
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(config).lstrip())
    for relative, content in (files or {}).items():
        path = model_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip())
    return model_dir


def add_add_sub(repository: Path, name: str = "add_sub", versions: tuple[int, ...] = (1,)) -> Path:
    model_dir = write_model(repository, name, ADD_SUB_CONFIG.format(name=name))
    for version in versions:
        build_add_sub(model_dir / str(version) / "model.onnx")
    return model_dir


def copy_demo_repository(target: Path) -> Path:
    """The bundled demo repository, with its ONNX files built."""
    shutil.copytree(
        DEMO_REPOSITORY, target, ignore=shutil.ignore_patterns("model.onnx", "__pycache__")
    )
    build_generated_files(target)
    return target
