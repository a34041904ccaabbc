"""events/ is the contract every layer publishes into, so it depends on none of them."""

from __future__ import annotations

import ast
from pathlib import Path

EVENTS = Path(__file__).resolve().parents[2] / "edgebox" / "events"


def test_events_import_nothing_else_from_edgebox():
    outside = []
    for path in sorted(EVENTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            outside += [
                f"{path.name} imports {name}"
                for name in names
                if name.startswith("edgebox") and not name.startswith("edgebox.events")
            ]
    assert outside == []
