"""Command line: ``edgebox serve``, ``edgebox check [--config FILE] [REPOSITORY]``,
``edgebox publish``,
``edgebox build-engine``, ``edgebox passwd``, ``edgebox --version``.

Flags take Triton's names where Triton has the flag (``--model-repository``,
``--model-control-mode``, ``--repository-poll-secs``, ``--load-model``,
``--http-port``, ``--grpc-port``, ``--log-verbose``, ``--strict-readiness``,
``--exit-timeout-secs``, ``--http-restricted-api``, ``--grpc-restricted-protocol``,
``--allow-metrics``, ``--metrics-address``, ``--allow-gpu-metrics``,
``--allow-cpu-metrics``),
so a tritonserver command line mostly carries over. Every top-level setting
has a flag made from its field in ``Settings`` (``http_port`` -> ``--http-port``,
help from its docstring; see ``add_setting_flags``), and every field of a
settings section one made from its names (``--mqtt-url``, ``--mqtt-qos``): a new
setting gets its flag, ``EDGEBOX_*`` variable and YAML key from its declaration.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import logging
import os
import re
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edgebox import __version__
from edgebox.errors import EdgeboxError
from edgebox.settings import (
    SECTIONS,
    Settings,
    SettingsError,
    SettingsProblem,
    load_settings,
)

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_CONFIG = 78
"""sysexits' EX_CONFIG: a bad setting, which restarting will not fix (the unit's
``RestartPreventExitStatus``)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgebox", description="Triton-compatible inference appliance for Jetson Orin."
    )
    parser.add_argument("--version", action="version", version=f"edgebox {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the daemon")
    serve.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML settings file (default: /etc/edgebox/edgebox.yaml if present)",
    )
    add_setting_flags(serve, Settings, _SERVE_SPECIAL_FLAGS)
    _add_section_flags(serve)

    check = commands.add_parser(
        "check",
        help="validate a model repository, a settings file or both, and list every problem",
        description="Validate without starting anything (no port bound, no model loaded, no "
        "broker contacted) and list every problem. Exit 0 when all is well, 1 for repository "
        "problems, 78 for settings problems.",
    )
    check.add_argument("repository", type=Path, nargs="?", metavar="REPOSITORY")
    check.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML settings file to validate, every section, each problem as FILE:LINE: message. "
        "The file is judged alone: EDGEBOX_* variables are not read, and the built-in "
        "defaults fill only what it leaves out",
    )

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

    passwd = commands.add_parser(
        "passwd",
        help="set the dashboard's admin password (its hash goes into the settings file)",
    )
    passwd.add_argument(
        "--config",
        type=Path,
        default=Path("/etc/edgebox/edgebox.yaml"),
        metavar="FILE",
        help="settings file to write (default: /etc/edgebox/edgebox.yaml)",
    )
    passwd.add_argument(
        "--stdin", action="store_true", help="read the password from one line of stdin"
    )

    build_engine = commands.add_parser(
        "build-engine",
        help="build a TensorRT engine from an ONNX file on this device and publish it "
        "as a new model version",
    )
    build_engine.add_argument("onnx", type=Path, metavar="MODEL.onnx", help="ONNX file to build")
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
        "--workspace", default=None, metavar="MB", help="builder workspace limit in MiB"
    )
    return parser


_SERVE_SPECIAL_FLAGS: dict[str, dict[str, Any]] = {
    "load_model": {
        "action": "append",
        "help": "model to load at start in explicit mode (repeatable; '*' = all)",
    },
    "http_restricted_api": {
        "action": "append",
        "metavar": "API[,API...]:KEY=VALUE",
        "help": "as in Triton: these HTTP APIs need header KEY: VALUE (repeatable)",
    },
    "grpc_restricted_protocol": {
        "action": "append",
        "metavar": "API[,API...]:KEY=VALUE",
        "help": "as in Triton: these gRPC APIs need metadata triton-grpc-protocol-KEY: VALUE "
        "(repeatable)",
    },
}
"""Settings whose flag is repeatable (each use adds one item), so not made
from the field alone."""

_SCALAR_KINDS = ("str", "int", "float", "bool", "Path", "Path | None")


def add_setting_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    special: Mapping[str, dict[str, Any]] | None = None,
) -> None:
    """``--<field-name>`` (``_`` as ``-``, dest the field's name) for every
    scalar field of the settings dataclass ``cls``, in field order; a field
    named in ``special`` gets those ``add_argument`` keywords instead, and
    sections and lists (any other type) get none here.

    The value stays the text given: ``load_settings`` reads it by the field's
    type like an ``EDGEBOX_*`` variable, so a bad value is a settings problem
    naming the flag (exit 78), and a bool takes Triton's ``true``/``false``
    (or ``1``/``0``, ``yes``/``no``, ``on``/``off``). The flag's default is
    "not given" (``SUPPRESS``), so only flags the user gave reach the layers.
    The help is the field's ``metadata["help"]``, else the first sentence of
    its docstring, then its default (or ``metadata["default_help"]``, for an
    empty default that stands for one worked out at start);
    ``metadata["choices"]`` and ``metadata["metavar"]`` pass through to
    argparse."""
    docs = _field_docs(cls)
    special = special or {}
    for field in dataclasses.fields(cls):
        flag = "--" + field.name.replace("_", "-")
        if field.name in special:
            parser.add_argument(flag, default=argparse.SUPPRESS, **special[field.name])
            continue
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
        if kind not in _SCALAR_KINDS:
            continue
        text = field.metadata.get("help") or _first_sentence(docs.get(field.name, field.name))
        extra = {
            key: field.metadata[key] for key in ("choices", "metavar") if key in field.metadata
        }
        shown = field.metadata.get("default_help") or _shown(field.default)
        parser.add_argument(
            flag,
            default=argparse.SUPPRESS,
            help=f"{text} (default: {shown})".replace("%", "%%"),
            **extra,
        )


def _shown(default: Any) -> str:
    """A default as a user would type it: ``true``, ``none``, ``empty``."""
    if isinstance(default, bool):
        return str(default).lower()
    return "none" if default is None else "empty" if default == "" else str(default)


def _field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string under its line in the class body),
    read from the source; empty when the source is not installed, and the
    flags' help falls back to the field names."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    if not isinstance(body, ast.ClassDef):
        return {}
    docs = {}
    for node, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = after.value.value
    return docs


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.split()).replace("``", "")
    match = re.match(r"(.+?[.!?])(?:\s|$)", text)
    return match.group(1) if match else text


def _add_section_flags(serve: argparse.ArgumentParser) -> None:
    """``--<section>-<field>`` for every field of every settings section; each
    one given sets that field alone (and turns the section on)."""
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            shown = field.metadata.get("default_help") or _shown(field.default)
            serve.add_argument(
                f"--{section}-{field.name.replace('_', '-')}",
                default=argparse.SUPPRESS,
                metavar=field.name.upper(),
                help=f"{section}.{field.name} (default: {shown}); see docs/configuration.md",
            )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "check":
        if args.repository is None and args.config is None:
            parser.error("check: give a REPOSITORY, --config FILE or both")
        return _check(args.repository, args.config)
    if args.command == "publish":
        return _publish(args)
    if args.command == "build-engine":
        return _build_engine(args)
    if args.command == "passwd":
        from edgebox.dashboard.password_file import passwd

        return passwd(args.config, args.stdin)
    parser.print_help()
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
    try:
        settings = load_settings(flags, config_file=args.config)
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"edgebox: {problem.located()}", file=sys.stderr)
        return EXIT_CONFIG
    if not settings.model_repository.is_dir():
        source = settings.sources.get("model_repository", "default")
        print(
            f"edgebox: setting 'model_repository' ({source}): '{settings.model_repository}' "
            "is not a folder",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    _configure_logging(settings.log_verbose)
    from edgebox.daemon import run_daemon

    environ = dict(os.environ)
    return run_daemon(
        settings, reread=lambda: load_settings(flags, config_file=args.config, environ=environ)
    )


def _check(repository: Path | None, config_file: Path | None) -> int:
    """Settings first (their problems win the exit status: 78), then the
    repository (1)."""
    status = EXIT_OK
    if config_file is not None:
        status = _check_config(config_file)
    if repository is not None:
        repository_status = _check_repository(repository)
        status = status or repository_status
    return status


def _check_config(config_file: Path) -> int:
    """``load_settings`` on the file alone, as ``serve`` reads it but with no
    environment and no flags: it builds values and reads the files they name
    (TLS, password, API key), and starts nothing."""
    try:
        settings = load_settings({}, config_file=config_file, environ={})
    except SettingsError as exc:
        for problem in exc.problems:
            print(_in_file(problem, config_file))
        print(f"{len(exc.problems)} problem(s) found in {config_file}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"{config_file}: ok ({_summary(settings)})")
    return EXIT_OK


def _in_file(problem: SettingsProblem, config_file: Path) -> str:
    """The problem with the file first, also when it has no line (a conflict
    with a default, a file that cannot be read)."""
    text = problem.located()
    return text if text.startswith(str(config_file)) else f"{config_file}: {text}"


def _summary(settings: Settings) -> str:
    ports = f"ports http {settings.http_port}, grpc {settings.grpc_port}, "
    if not settings.allow_metrics:
        ports += "metrics off, "
    elif settings.metrics_address:
        address = settings.metrics_address
        address = f"[{address}]" if ":" in address else address
        ports += f"metrics {address}:{settings.metrics_port}, "
    else:
        ports += f"metrics {settings.metrics_port}, "
    dashboard = settings.dashboard
    ports += f"dashboard {dashboard.port}" if dashboard.enabled else "dashboard off"
    mqtt = f"mqtt {settings.mqtt.url}" if settings.mqtt else "mqtt off"
    return (
        f"repository {settings.model_repository} in {settings.model_control_mode} mode; "
        f"{ports}; {mqtt}; {len(settings.streams)} streams; "
        f"telemetry every {settings.telemetry.interval_s} s"
    )


def _check_repository(repository: Path) -> int:
    _configure_logging(0)
    from edgebox.lifecycle.check import check_repository

    problems = check_repository(repository)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) found in {repository}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"{repository}: no problems found", file=sys.stderr)
    return EXIT_OK


def _publish(args: argparse.Namespace) -> int:
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


def _build_engine(args: argparse.Namespace) -> int:
    _configure_logging(0)
    from edgebox.engine_build.command import build_engine
    from edgebox.engine_build.options import parse_build_options

    def build() -> Path:
        options = parse_build_options(
            args.onnx,
            args.repository,
            args.model,
            version=args.version,
            fp16=args.fp16,
            int8=args.int8,
            calibration_dir=args.calibration_dir,
            preprocess_model=args.preprocess_model,
            recalibrate=args.recalibrate,
            dla_core=args.dla_core,
            gpu_fallback=args.gpu_fallback,
            min_shapes=args.min_shapes,
            opt_shapes=args.opt_shapes,
            max_shapes=args.max_shapes,
            workspace_mb=args.workspace,
        )
        return build_engine(options)

    return _report_published(args.model, build)


def _configure_logging(verbose: int) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose > 0 else logging.INFO,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        stream=sys.stderr,
    )
