"""Writes the generated model files of the bundled demo repository.

Configs and model.py files are committed; ONNX files are built here from code
so the repository holds no opaque binaries. Idempotent: existing files are kept.

    python scripts/build_demo_repository.py model_repository
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.onnx_builders import build_add_sub


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "model_repository")
    target = root / "add_sub" / "1" / "model.onnx"
    if not target.exists():
        build_add_sub(target)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
