"""Command line: ``edgebox serve``, ``edgebox check [--config FILE] [REPOSITORY]``,
``edgebox publish``,
``edgebox build-engine``, ``edgebox passwd``, ``edgebox --version``.

Flags take Triton's names where Triton has the flag (``--model-repository``,
``--model-control-mode``, ``--repository-poll-secs``, ``--load-model``,
``--http-port``, ``--grpc-port``, ``--log-verbose``, ``--strict-readiness``,
``--exit-timeout-secs``, ``--http-restricted-api``, ``--grpc-restricted-protocol``,
``--allow-metrics``, ``--metrics-address``, ``--allow-gpu-metrics``,
``--allow-cpu-metrics``),
so a tritonserver command line mostly carries over. Every field of a settings
section has a flag made from its names (``--mqtt-url``, ``--mqtt-qos``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from edgebox import __version__
from edgebox.errors import EdgeboxError
from edgebox.settings import (
    CONTROL_MODES,
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
    keep = argparse.SUPPRESS
    serve.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML settings file (default: /etc/edgebox/edgebox.yaml if present)",
    )
    serve.add_argument("--model-repository", default=keep, help="model repository folder")
    serve.add_argument(
        "--model-control-mode",
        choices=CONTROL_MODES,
        default=keep,
        help="none, poll or explicit (as in Triton)",
    )
    serve.add_argument(
        "--repository-poll-secs", default=keep, help="seconds between repository scans in poll mode"
    )
    serve.add_argument(
        "--load-model",
        action="append",
        default=keep,
        help="model to load at start in explicit mode (repeatable; '*' = all)",
    )
    serve.add_argument("--host", default=keep, help="address to bind (default 0.0.0.0)")
    serve.add_argument(
        "--server-name",
        default=keep,
        help="name in server metadata (default edgebox; 'triton' for clients that check it)",
    )
    serve.add_argument(
        "--http-port", default=keep, help="HTTP port (default 8000; 0 = any free port)"
    )
    serve.add_argument(
        "--http-max-connections", default=keep, help="open HTTP connections at once (1024)"
    )
    serve.add_argument(
        "--http-max-connections-per-client",
        default=keep,
        help="open HTTP connections from one client address (64)",
    )
    serve.add_argument(
        "--http-thread-count", default=keep, help="threads answering HTTP requests (32)"
    )
    serve.add_argument(
        "--http-max-body-bytes-in-flight",
        default=keep,
        help="request body bytes held at once across connections (0: 4 x max request bytes)",
    )
    serve.add_argument(
        "--http-min-transfer-bytes-per-s",
        default=keep,
        help="slowest request body upload or response download accepted (65536)",
    )
    serve.add_argument(
        "--grpc-port", default=keep, help="gRPC port (default 8001; 0 = any free port)"
    )
    serve.add_argument(
        "--metrics-port",
        default=keep,
        help="Prometheus metrics port, GET /metrics (default 8002; 0 = any free port)",
    )
    serve.add_argument(
        "--allow-metrics",
        default=keep,
        help="false: bind no metrics port at all (default true)",
    )
    serve.add_argument(
        "--metrics-address",
        default=keep,
        help="address the metrics port binds (default: --host; 127.0.0.1 = this device only)",
    )
    serve.add_argument(
        "--allow-gpu-metrics", default=keep, help="false: leave nv_gpu_* out of /metrics"
    )
    serve.add_argument(
        "--allow-cpu-metrics", default=keep, help="false: leave nv_cpu_* out of /metrics"
    )
    serve.add_argument(
        "--grpc-thread-count", default=keep, help="threads doing gRPC requests' work (32)"
    )
    serve.add_argument(
        "--grpc-max-concurrent-streams",
        default=keep,
        help="calls one gRPC connection may have open at once (128)",
    )
    serve.add_argument(
        "--shared-memory-max-bytes",
        default=keep,
        help="system shared memory bytes clients may register in all (default 1 GiB)",
    )
    serve.add_argument(
        "--shared-memory-max-regions",
        default=keep,
        help="system shared memory regions clients may register at once (64)",
    )
    serve.add_argument(
        "--max-request-bytes",
        default=keep,
        help="largest HTTP request body or gRPC message accepted (default 64 MiB)",
    )
    serve.add_argument(
        "--strict-readiness", default=keep, help="true: ready only while every model is ready"
    )
    serve.add_argument(
        "--exit-timeout-secs", default=keep, help="how long shutdown waits for in-flight requests"
    )
    serve.add_argument(
        "--log-verbose", default=keep, help="0 = state changes and problems, 1 = debug"
    )
    serve.add_argument(
        "--max-warmup-requests", default=keep, help="most warm-up requests per version (1000)"
    )
    serve.add_argument(
        "--max-instances-per-model", default=keep, help="most instances per version (16)"
    )
    serve.add_argument(
        "--max-instances-total", default=keep, help="most instances across all models (64)"
    )
    serve.add_argument(
        "--max-threads-per-instance",
        default=keep,
        help="most ONNX Runtime threads per instance (default: the CPU cores)",
    )
    serve.add_argument(
        "--python-isolation",
        default=keep,
        help="where python models run unless their config says: in_process (default) or process",
    )
    serve.add_argument(
        "--python-memory-limit-mb",
        default=keep,
        help="memory cap of each isolated python model process in MB (2048; 0 = none)",
    )
    serve.add_argument(
        "--http-restricted-api",
        action="append",
        default=keep,
        metavar="API[,API...]:KEY=VALUE",
        help="as in Triton: these HTTP APIs need header KEY: VALUE (repeatable)",
    )
    serve.add_argument(
        "--grpc-restricted-protocol",
        action="append",
        default=keep,
        metavar="API[,API...]:KEY=VALUE",
        help="as in Triton: these gRPC APIs need metadata triton-grpc-protocol-KEY: VALUE "
        "(repeatable)",
    )
    serve.add_argument(
        "--api-key-file",
        default=keep,
        metavar="FILE",
        help="key that lets non-loopback clients use model-repository, shared-memory, "
        "trace and logging (header edgebox-api-key)",
    )
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


def _add_section_flags(serve: argparse.ArgumentParser) -> None:
    """``--<section>-<field>`` for every field of every settings section; each
    one given sets that field alone (and turns the section on)."""
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            default = field.default
            shown = "none" if default is None else "empty" if default == "" else default
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
