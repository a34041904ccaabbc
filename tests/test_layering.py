"""Imports point one way (STYLE.md, "Layering"): protocol -> dataplane ->
scheduling -> backends; repository/ and lifecycle/ never reach the transports;
backends never reach back up."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "edgebox"

FORBIDDEN = {
    "repository": [
        "edgebox.protocol",
        "edgebox.dashboard",
        "edgebox.mqtt",
        "edgebox.lifecycle",
        "edgebox.scheduling",
        "edgebox.backends",
        "edgebox.dataplane",
    ],
    "lifecycle": ["edgebox.protocol", "edgebox.dashboard", "edgebox.mqtt", "edgebox.dataplane"],
    "scheduling": [
        "edgebox.protocol",
        "edgebox.dataplane",
        "edgebox.lifecycle",
        "edgebox.repository",
    ],
    "backends": [
        "edgebox.protocol",
        "edgebox.dataplane",
        "edgebox.lifecycle",
        "edgebox.scheduling",
    ],
    "protocol": ["edgebox.backends", "edgebox.scheduling", "edgebox.lifecycle.manager"],
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(layer):
    offenders = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for name in imports_of(path):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[layer]):
                offenders.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_only_error_map_knows_http_statuses():
    users = [
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if "STATUS_BY_CODE" in path.read_text() and path.name != "error_map.py"  # one per transport
    ]
    assert users == []
