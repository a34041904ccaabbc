"""``edgebox build-engine`` as a user runs it: flags and repository problems
are refused before TensorRT is needed, and on a machine without TensorRT the
command says what is missing, exits non-zero and publishes nothing. The
TensorRT-less run is a real subprocess, as in ``tests/test_cli.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run_edgebox
from edgebox.cli import main
from edgebox.commands.console import EXIT_OK, EXIT_PROBLEMS
from model_fixtures import REPO_ROOT


def tensorrt_importable() -> bool:
    """Asked of a fresh interpreter like the one ``run_edgebox`` starts: in
    this one, pytest puts test folders on sys.path, and any folder named
    ``tensorrt`` there would import as an empty namespace package."""
    probe = subprocess.run(
        [sys.executable, "-c", "import tensorrt; tensorrt.Builder"],
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=60,
    )
    return probe.returncode == 0


@pytest.mark.skipif(tensorrt_importable(), reason="TensorRT is installed; this checks its absence")
def test_without_tensorrt_the_command_says_what_is_missing_and_publishes_nothing(
    tiny_onnx: Path, repo: Path
) -> None:
    result = run_edgebox(
        "build-engine", str(tiny_onnx), "--repository", str(repo), "--model", "det", "--fp16"
    )

    assert result.returncode == EXIT_PROBLEMS
    assert result.stdout == ""
    assert result.stderr == (
        "edgebox: TensorRT is not installed (No module named 'tensorrt'); on a Jetson it comes "
        "with JetPack (python3-libnvinfer)\n"
    )
    assert list(repo.iterdir()) == []


def test_dla_without_a_reduced_precision_is_refused_before_anything_else(
    tiny_onnx: Path, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["build-engine", str(tiny_onnx), "--repository", str(repo), "--model", "det",
         "--dla-core", "0"]
    )  # fmt: skip

    assert code == EXIT_PROBLEMS
    assert capsys.readouterr().err == (
        "edgebox: --dla-core 0: DLA runs only FP16 and INT8 layers; add --fp16 or --int8 "
        "(trtexec: --useDLACore=0 --fp16)\n"
    )
    assert list(repo.iterdir()) == []


def test_a_missing_repository_is_refused_before_tensorrt_is_needed(
    tiny_onnx: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "no_such_repo"

    code = main(
        ["build-engine", str(tiny_onnx), "--repository", str(absent), "--model", "det", "--fp16"]
    )

    assert code == EXIT_PROBLEMS
    assert capsys.readouterr().err == f"edgebox: repository '{absent}' is not a folder\n"


def test_bad_shapes_are_refused_with_the_flag_name(
    tiny_onnx: Path, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["build-engine", str(tiny_onnx), "--repository", str(repo), "--model", "det",
         "--fp16", "--min-shapes", "input:1x3x4x6", "--max-shapes", "input:8x3x4x6"]
    )  # fmt: skip

    assert code == EXIT_PROBLEMS
    assert capsys.readouterr().err == (
        "edgebox: give --min-shapes, --opt-shapes and --max-shapes together (missing: "
        "--opt-shapes), or only --opt-shapes for one fixed shape, as trtexec does\n"
    )


def test_help_lists_build_engine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_OK
    assert "build-engine" in capsys.readouterr().out
