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


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _importers(paths: list[Path], wanted: str) -> list[str]:
    return [
        str(path.relative_to(PACKAGE.parent))
        for path in paths
        if any(name == wanted or name.startswith(wanted + ".") for name in imports_of(path))
    ]


def test_only_the_http_transport_knows_http_statuses():
    """HTTP statuses (the stdlib's ``http``) appear only under protocol/http/:
    the core speaks ErrorCode, each transport maps it to its own statuses."""
    outside = [p for p in _modules(PACKAGE) if PACKAGE / "protocol" / "http" not in p.parents]
    assert _importers(outside, "http") == []


def test_within_a_transport_only_its_error_map_reads_error_codes():
    """Each transport turns ErrorCode into its statuses in one module (Triton's
    frontends each map ``Status`` codes once)."""
    for transport in sorted(p for p in (PACKAGE / "protocol").iterdir() if p.is_dir()):
        readers = [
            path.name
            for path in _modules(transport)
            if any(
                isinstance(node, ast.ImportFrom)
                and node.module == "edgebox.errors"
                and any(alias.name == "ErrorCode" for alias in node.names)
                for node in ast.walk(ast.parse(path.read_text()))
            )
        ]
        assert readers in ([], ["error_map.py"]), f"{transport.name}: {readers}"


def test_only_the_composition_root_reaches_into_a_transport():
    """The daemon builds the transports; nothing else in the package (the
    dataplane, streams, lifecycle) may depend on one."""
    protocol = PACKAGE / "protocol"
    outside = [p for p in _modules(PACKAGE) if protocol not in p.parents]
    for transport in sorted(p for p in protocol.iterdir() if p.is_dir()):
        name = f"edgebox.protocol.{transport.name}"
        assert _importers(outside, name) in ([], ["edgebox/daemon.py"]), name
