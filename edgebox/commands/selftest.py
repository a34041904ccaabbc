"""``edgebox selftest``: the platform, the libraries inference and cameras
need, what the daemon will need from this machine with its settings (ports,
the broker, the spool's disk, the repository), a frame from each
configured stream's source, and on a Jetson the demo detector as TensorRT
engines on the GPU and each DLA core, each marked pass, fail, warn, "not on
this machine" or "not configured". Exit 1 when any check fails, 78 when the
settings themselves are wrong."""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from pathlib import Path

from edgebox.commands.console import EXIT_CONFIG, EXIT_OK, EXIT_PROBLEMS
from edgebox.selftest.cameras import camera_checks
from edgebox.selftest.engines import ENGINE_SECONDS, engine_checks, skipped
from edgebox.selftest.environment import environment_checks
from edgebox.selftest.platform import platform_checks
from edgebox.selftest.report import Report
from edgebox.settings import SettingsError, load_settings
from edgebox.state_lock import LOCK_NAME


def add_parser(commands: argparse._SubParsersAction) -> None:
    selftest = commands.add_parser(
        "selftest",
        help="check this device: platform, libraries, ports, broker, spool disk, repository, "
        "cameras, TensorRT engines",
        description="Check the platform (module, L4T and JetPack, power mode, telemetry), "
        "TensorRT, ONNX Runtime and OpenCV, and what the daemon needs with its settings: its "
        "ports, the MQTT broker with the configured credentials, disk for the spool, the "
        "model repository; then a frame from each configured stream's source; then, on a "
        "Jetson, the demo detector built into TensorRT engines on the GPU and each DLA core, "
        "compared with ONNX Runtime and timed with the board's power (minutes). Exit 0 when "
        "nothing fails, 1 when something does, 78 for a settings problem.",
    )
    selftest.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML settings file, as serve takes it (default: /etc/edgebox/edgebox.yaml if "
        "present); EDGEBOX_* variables apply as they do to serve",
    )
    selftest.add_argument("--json", action="store_true", help="print one JSON document")
    selftest.add_argument(
        "--no-engines",
        action="store_true",
        help="leave out the TensorRT engines (builds and timed runs take minutes on a Jetson)",
    )
    selftest.add_argument(
        "--engine-seconds",
        type=_positive_seconds,
        default=ENGINE_SECONDS,
        metavar="N",
        help=f"run each engine N seconds for its fps and power (default {ENGINE_SECONDS:g})",
    )
    # Fixture trees in tests; "/" on a device.
    selftest.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings({}, config_file=args.config)
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"edgebox: {problem.located()}", file=sys.stderr)
        return EXIT_CONFIG
    report = Report()
    report.add(*platform_checks(args.root))
    report.add(*environment_checks(settings, daemon_running(settings.state_directory)))
    report.add(*camera_checks(settings.streams))
    if args.no_engines:
        report.add(*skipped())
    else:
        report.add(
            *engine_checks(args.root, settings.model_repository, seconds=args.engine_seconds)
        )
    print(report.to_json() if args.json else report.to_text())
    return EXIT_PROBLEMS if report.failed else EXIT_OK


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got '{text}'")
    return seconds


def daemon_running(state_directory: Path) -> bool:
    """Whether a daemon holds the state directory's lock (``state_lock``),
    tried without taking it or making anything."""
    try:
        fd = os.open(state_directory / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
