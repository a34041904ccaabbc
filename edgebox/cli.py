"""Command line: ``edgebox serve``, ``edgebox check [--config FILE] [REPOSITORY]``,
``edgebox selftest [--config FILE] [--json]``, ``edgebox publish``,
``edgebox build-engine``, ``edgebox passwd``,
``edgebox rollout status|promote|abort|release MODEL``,
``edgebox fleet keygen|pack|deploy|status|rollback``, ``edgebox --version``.
Each subcommand lives in ``commands/``; this module builds the parser from
them and runs the one asked for.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from edgebox import __version__
from edgebox.commands import check, fleet, passwd, publish, rollout, selftest, serve
from edgebox.commands.console import EXIT_OK

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": serve.run,
    "check": check.run,
    "selftest": selftest.run,
    "publish": publish.run_publish,
    "build-engine": publish.run_build_engine,
    "passwd": passwd.run,
    "rollout": rollout.run,
    "fleet": fleet.run,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgebox", description="Triton-compatible inference appliance for Jetson Orin."
    )
    parser.add_argument("--version", action="version", version=f"edgebox {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve.add_parser(commands)
    check.add_parser(commands)
    selftest.add_parser(commands)
    publish.add_publish_parser(commands)
    passwd.add_parser(commands)
    publish.add_build_engine_parser(commands)
    rollout.add_parser(commands)
    fleet.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The process's exit status (``commands.console``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    if args.command == "check" and args.repository is None and args.config is None:
        parser.error("check: give a REPOSITORY, --config FILE or both")
    return _COMMANDS[args.command](args)
