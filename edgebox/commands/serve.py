"""``edgebox serve``: the settings layered from the file, ``EDGEBOX_*`` and the
flags, checked, then the daemon run until SIGTERM.

Flags take Triton's names where Triton has the flag (``--model-repository``,
``--model-control-mode``, ``--repository-poll-secs``, ``--load-model``,
``--http-port``, ``--grpc-port``, ``--log-verbose``, ``--strict-readiness``,
``--exit-timeout-secs``, ``--http-restricted-api``, ``--grpc-restricted-protocol``,
``--cache-config``, ``--allow-metrics``, ``--metrics-address``, ``--allow-gpu-metrics``,
``--allow-cpu-metrics``), so a tritonserver command line mostly carries over.
Every setting has a flag made from its declaration (``setting_flags``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from edgebox.commands.console import EXIT_CONFIG, EXIT_IN_USE, configure_logging
from edgebox.commands.setting_flags import add_section_flags, add_setting_flags
from edgebox.settings import Settings, SettingsError, load_settings
from edgebox.state_lock import StateDirectoryInUse, hold_state_directory

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
    "rate_limit_resource": {
        "action": "append",
        "metavar": "NAME:COUNT[:DEVICE]",
        "help": "as in Triton: copies of a rate limiter resource, per device or on DEVICE "
        "(repeatable)",
    },
    "cache_config": {
        "action": "append",
        "metavar": "<cache>,<key>=<value>",
        "help": "as in Triton: the response cache, e.g. local,size=1048576 (repeatable; "
        "only the local cache)",
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


def add_parser(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="run the daemon")
    serve.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML settings file (default: /etc/edgebox/edgebox.yaml if present)",
    )
    add_setting_flags(serve, Settings, _SERVE_SPECIAL_FLAGS)
    add_section_flags(serve)


def run(args: argparse.Namespace) -> int:
    """A settings problem or a repository that is no folder exits 78 before
    anything starts; a SIGHUP re-reads the same layers, with the environment
    as it was at start."""
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
    try:
        lock = hold_state_directory(settings.state_directory)
    except StateDirectoryInUse as exc:
        print(f"edgebox: {exc}", file=sys.stderr)
        return EXIT_IN_USE
    except OSError:
        lock = None  # open_state logs the directory as unusable
    configure_logging(settings.log_verbose)
    from edgebox.daemon import run_daemon

    environ = dict(os.environ)
    try:
        return run_daemon(
            settings, reread=lambda: load_settings(flags, config_file=args.config, environ=environ)
        )
    finally:
        if lock is not None:
            lock.release()
