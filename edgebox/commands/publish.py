"""``edgebox publish`` and ``edgebox build-engine``: the two commands that end
by publishing a new model version into a repository, atomically, so a daemon
polling it never sees half a version (``repository.publish``). Each prints
where the version went, or every problem that stopped it (exit 1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from edgebox.commands.console import EXIT_OK, EXIT_PROBLEMS, configure_logging
from edgebox.errors import EdgeboxError


def add_publish_parser(commands: argparse._SubParsersAction) -> None:
    publish = commands.add_parser(
        "publish",
        help="copy a model version into a repository atomically (safe while the daemon polls)",
    )
    publish.add_argument(
        "source",
        type=Path,
        metavar="MODEL_DIR_OR_FILE",
        help="model file (model.onnx, model.plan, model.py) or a folder holding the version",
    )
    publish.add_argument(
        "--model", required=True, metavar="NAME", help="model name (its folder in the repository)"
    )
    publish.add_argument(
        "--version", default=None, metavar="N", help="version number (default: highest + 1)"
    )
    publish.add_argument(
        "--repository", type=Path, required=True, metavar="REPO", help="model repository folder"
    )
    publish.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="config.pbtxt to install with the version (required for a new model)",
    )


def add_build_engine_parser(commands: argparse._SubParsersAction) -> None:
    """Each option's dest is ``parse_build_options``' keyword of that name, so
    the parsed arguments are the build options as typed."""
    build_engine = commands.add_parser(
        "build-engine",
        help="build a TensorRT engine from an ONNX file on this device and publish it "
        "as a new model version",
    )
    build_engine.add_argument(
        "onnx_path", type=Path, metavar="MODEL.onnx", help="ONNX file to build"
    )
    build_engine.add_argument(
        "--repository", type=Path, required=True, metavar="REPO", help="model repository folder"
    )
    build_engine.add_argument(
        "--model", required=True, metavar="NAME", help="model name (its folder in the repository)"
    )
    build_engine.add_argument(
        "--version", default=None, metavar="N", help="version number (default: highest + 1)"
    )
    build_engine.add_argument("--fp16", action="store_true", help="allow FP16 layers")
    build_engine.add_argument(
        "--int8", action="store_true", help="allow INT8 layers, calibrated on --calibration-dir"
    )
    build_engine.add_argument(
        "--calibration-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="images (.jpg, .png, .bmp) to calibrate INT8 with, through the model's preprocessing",
    )
    build_engine.add_argument(
        "--preprocess-model",
        default=None,
        metavar="NAME",
        help="python model that preprocesses calibration images "
        "(default: the one feeding the model in an ensemble)",
    )
    build_engine.add_argument(
        "--recalibrate",
        action="store_true",
        help="calibrate from the images even when an earlier version's cache fits",
    )
    build_engine.add_argument(
        "--dla-core", default=None, metavar="N", help="build for DLA core N (needs --fp16/--int8)"
    )
    build_engine.add_argument(
        "--gpu-fallback",
        action="store_true",
        help="with --dla-core: run layers the DLA cannot run on the GPU",
    )
    for flag, which in (("--min-shapes", "min"), ("--opt-shapes", "opt"), ("--max-shapes", "max")):
        build_engine.add_argument(
            flag,
            default=None,
            metavar="SPEC",
            help=f"{which} shapes of the optimization profile, as trtexec: input:1x3x360x640,...",
        )
    build_engine.add_argument(
        "--workspace",
        dest="workspace_mb",
        default=None,
        metavar="MB",
        help="builder workspace limit in MiB",
    )


def run_publish(args: argparse.Namespace) -> int:
    from edgebox.repository.publish import publish_version

    return _report_published(
        args.model,
        lambda: publish_version(
            args.source, args.repository, args.model, version=args.version, config=args.config
        ),
    )


def _report_published(model: str, publish: Callable[[], Path]) -> int:
    """Runs a command that ends by publishing a version; prints where it went,
    or every problem that stopped it."""
    from edgebox.repository.publish import ConfigRejected

    try:
        path = publish()
    except ConfigRejected as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"edgebox: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    except EdgeboxError as exc:
        print(f"edgebox: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"published model '{model}' version {path.name} to {path}")
    return EXIT_OK


def run_build_engine(args: argparse.Namespace) -> int:
    configure_logging(0)
    from edgebox.engine_build.command import build_engine
    from edgebox.engine_build.options import parse_build_options

    typed = {name: value for name, value in vars(args).items() if name != "command"}
    return _report_published(args.model, lambda: build_engine(parse_build_options(**typed)))
