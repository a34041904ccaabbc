from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


class SmallFilesystem:
    """A real tmpfs of a few hundred kB mounted under the test's folder: a
    disk that fills up, or turns read-only, for real."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def remount(self, option: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{option}", str(self.path)], check=True)

    def used_bytes(self) -> int:
        stats = os.statvfs(self.path)
        return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Callable[[int], SmallFilesystem]]:
    """``small_filesystem(size_bytes)``; unmounted at teardown. Needs root (CI
    runs as root); skipped elsewhere."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI and `make test` in CI run as root)")
    mounted: list[Path] = []

    def mount(size_bytes: int) -> SmallFilesystem:
        path = tmp_path / f"fs{len(mounted)}"
        path.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(
                f"cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): "
                f"{done.stderr.strip()}"
            )
        mounted.append(path)
        return SmallFilesystem(path)

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)
