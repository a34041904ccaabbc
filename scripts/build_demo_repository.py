"""Writes the generated model files of the bundled demo repository.

Configs and model.py files are committed; ONNX files are built here from code
so the repository holds no opaque binaries. Idempotent: existing files are kept.

    python scripts/build_demo_repository.py model_repository
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.lane_detector import build_lane_detector
from scripts.onnx_builders import build_add_sub

GENERATED: dict[str, Callable[[Path], Path]] = {
    "add_sub/1/model.onnx": build_add_sub,
    "lane_detector/1/model.onnx": build_lane_detector,
}


def build_generated_files(root: Path) -> list[Path]:
    """Build every generated file missing under ``root``; returns those written."""
    written = []
    for relative, build in GENERATED.items():
        target = root / relative
        if not target.exists():
            written.append(build(target))
    return written


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "model_repository")
    for path in build_generated_files(root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
