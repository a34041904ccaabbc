"""Which GPUs this machine has, from device nodes under a root path (so tests
can point it at a fake tree). A Jetson's integrated GPU counts as GPU 0."""

from __future__ import annotations

import re
from pathlib import Path

_JETSON_GPU_NODES = ("nvhost-ctrl-gpu", "nvhost-gpu", "nvgpu/igpu0/ctrl")


def gpu_ids(dev: Path = Path("/dev")) -> list[int]:
    discrete = sorted(
        int(match.group(1))
        for path in (dev.glob("nvidia[0-9]*") if dev.is_dir() else [])
        if (match := re.fullmatch(r"nvidia(\d+)", path.name))
    )
    if discrete:
        return discrete
    if any((dev / node).exists() for node in _JETSON_GPU_NODES):
        return [0]
    return []
