"""One daemon per state directory: a second ``edgebox serve`` on a held one
stops at once naming the holder, and the lock goes with the holder."""

from __future__ import annotations

import subprocess
import sys

import pytest

from daemon_process import DaemonProcess
from edgebox.commands.console import EXIT_IN_USE
from edgebox.state_lock import StateDirectoryInUse, hold_state_directory


def test_a_held_directory_is_refused_until_released(tmp_path):
    first = hold_state_directory(tmp_path / "state")
    assert (tmp_path / "state" / "edgebox.lock").read_text().strip().isdigit()
    with pytest.raises(StateDirectoryInUse, match=r"in use by another edgebox \(pid \d+\)"):
        hold_state_directory(tmp_path / "state")
    first.release()
    hold_state_directory(tmp_path / "state").release()


def test_the_lock_ends_with_the_process_that_held_it(tmp_path):
    holder = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from edgebox.state_lock import "
            "hold_state_directory; hold_state_directory(Path(sys.argv[1]))",
            str(tmp_path / "state"),
        ],
        check=True,
    )
    assert holder.returncode == 0
    hold_state_directory(tmp_path / "state").release()


def test_a_second_daemon_on_the_same_state_directory_exits_naming_the_first(tmp_path):
    repository = tmp_path / "models"
    repository.mkdir()
    with DaemonProcess(repository, tmp_path / "first.log", []) as first:
        state = first.log_path.with_suffix(".state")
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "edgebox",
                "serve",
                "--model-repository",
                str(repository),
                "--host",
                "127.0.0.1",
                "--http-port",
                "0",
                "--grpc-port",
                "0",
                "--metrics-port",
                "0",
                "--dashboard-enabled",
                "false",
                "--state-directory",
                str(state),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == EXIT_IN_USE, second.stderr
        assert (
            f"state directory '{state}' is in use by another edgebox (pid {first.process.pid})"
            in second.stderr
        )
        assert first.is_ready()
