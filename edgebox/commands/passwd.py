"""``edgebox passwd``: the dashboard's admin password set in the settings file,
as a hash (``dashboard.password_file``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: argparse._SubParsersAction) -> None:
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


def run(args: argparse.Namespace) -> int:
    from edgebox.dashboard.password_file import passwd

    return passwd(args.config, args.stdin)
