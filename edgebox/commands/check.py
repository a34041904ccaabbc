"""``edgebox check``: a model repository, a settings file or both validated
without starting anything (no port bound, no model loaded, no broker
contacted), every problem listed. Settings problems exit 78, repository
problems 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgebox.commands.console import EXIT_CONFIG, EXIT_OK, EXIT_PROBLEMS, configure_logging
from edgebox.settings import Settings, SettingsError, SettingsProblem, load_settings


def add_parser(commands: argparse._SubParsersAction) -> None:
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


def run(args: argparse.Namespace) -> int:
    """Settings first (their problems win the exit status: 78), then the
    repository (1)."""
    repository, config_file = args.repository, args.config
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
    configure_logging(0)
    from edgebox.lifecycle.check import check_repository

    problems = check_repository(repository)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) found in {repository}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"{repository}: no problems found", file=sys.stderr)
    return EXIT_OK
