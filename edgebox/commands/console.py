"""What every command shares on the console: its exit statuses and the log
format it writes to stderr (the journal's, under systemd)."""

from __future__ import annotations

import argparse
import logging
import sys

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_UNREACHABLE = 69
"""sysexits' EX_UNAVAILABLE: a command that talks to the daemon found none
answering, which is not the daemon refusing (``EXIT_PROBLEMS``)."""
EXIT_IN_USE = 75
"""sysexits' EX_TEMPFAIL: the state directory is another daemon's; the unit
restarts and gets it once that one has stopped."""
EXIT_CONFIG = 78
"""sysexits' EX_CONFIG: a bad setting, which restarting will not fix (the unit's
``RestartPreventExitStatus``)."""


def configure_logging(verbose: int) -> None:
    """DEBUG from ``log_verbose`` 1 up, INFO below; one line a record."""
    logging.basicConfig(
        level=logging.DEBUG if verbose > 0 else logging.INFO,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def argument_type(convert):
    """``convert`` as an argparse type whose ValueError is the usage error
    shown (argparse would otherwise print only 'invalid value')."""

    def parse(text: str):
        try:
            return convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse
