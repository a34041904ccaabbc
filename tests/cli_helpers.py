"""The ``edgebox`` command as a user runs it, and what a command left on disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from model_fixtures import REPO_ROOT


def run_edgebox(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m edgebox ARGS`` in a fresh interpreter from the repository
    root, without the ``EDGEBOX_*`` variables of the test's environment;
    stdout and stderr are captured as text."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEBOX_")}
    return subprocess.run(
        [sys.executable, "-m", "edgebox", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry below ``root``: files with their bytes, folders as None."""
    entries: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            entries[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            entries[os.path.relpath(path, root)] = Path(path).read_bytes()
    return entries
