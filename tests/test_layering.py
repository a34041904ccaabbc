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
    "alerts": [
        "edgebox.protocol",
        "edgebox.dashboard",
        "edgebox.dataplane",
        "edgebox.lifecycle",
        "edgebox.repository",
        "edgebox.scheduling",
        "edgebox.backends",
    ],
    "caching": [
        "edgebox.protocol",
        "edgebox.dataplane",
        "edgebox.lifecycle",
        "edgebox.repository",
        "edgebox.scheduling",
        "edgebox.backends",
    ],
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


FOREIGN_HTTP_CLIENTS = (PACKAGE / "fleet" / "artifact_download.py",)
"""Clients of HTTP servers that are not edgebox (artifact stores): they read
those servers' statuses (206, 416, redirects) and turn them into errors
themselves, as a transport would; nothing in them serves edgebox's API."""


def test_only_the_http_transport_knows_http_statuses():
    """HTTP statuses (the stdlib's ``http``) appear only under protocol/http/:
    the core speaks ErrorCode, each transport maps it to its own statuses."""
    outside = [
        p
        for p in _modules(PACKAGE)
        if PACKAGE / "protocol" / "http" not in p.parents and p not in FOREIGN_HTTP_CLIENTS
    ]
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


DAEMON_CLIENT = "edgebox.protocol.http.daemon_client"
"""The HTTP transport's client end, which commands use to call a running
daemon: HTTP statuses stay in the transport's folder that way."""


def test_only_the_composition_root_reaches_into_a_transport():
    """The daemon builds the transports; nothing else in the package (the
    dataplane, streams, lifecycle) may depend on one. A command may use the
    client end of the HTTP transport, and nothing else of it."""
    protocol = PACKAGE / "protocol"
    outside = [p for p in _modules(PACKAGE) if protocol not in p.parents]
    commands = PACKAGE / "commands"
    for transport in sorted(p for p in protocol.iterdir() if p.is_dir()):
        name = f"edgebox.protocol.{transport.name}"
        reaching = [
            f"{path.relative_to(PACKAGE.parent)} imports {module}"
            for path in outside
            for module in sorted(imports_of(path))
            if (module == name or module.startswith(name + "."))
            and path != PACKAGE / "daemon.py"
            and not (commands in path.parents and module == DAEMON_CLIENT)
        ]
        assert reaching == [], "\n".join(reaching)


LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "tensors",
        "signature",
        "responses",
        "backoff",
        "log_limiter",
        "secrets_mask",
        "log_ring",
        "malloc_tuning",
        "audit",
        "sd_notify",
        "state_lock",
        "wsgi_port",
        "devices",
        "log_settings",
        "trace_settings",
        "extension_settings",
        "events",
        "summaries",
        "__init__",
    ),
    ("repository",),
    ("backends",),
    ("scheduling", "caching"),
    ("lifecycle",),
    ("dataplane", "dataplane_results", "repository_control"),
    ("protocol", "engine_build"),
    ("telemetry", "streams"),
    ("mqtt",),
    ("fleet", "alerts"),
    ("history",),
    ("metrics", "dashboard"),
    (
        "settings",
        "settings_reload",
        "live_reload",
        "daemon",
        "selftest",
        "commands",
        "cli",
        "__main__",
    ),
)
"""Bottom to top (docs/architecture.md): an import goes to its own layer or
below. The foundation is what every layer may use (``__init__`` is the
package's version); the top composes."""


def _layer_of(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    for index, names in enumerate(LAYERS):
        if part in names:
            return index
    raise AssertionError(f"{module}: in no layer of LAYERS; give it one")


def _import_graph() -> dict[str, set[str]]:
    """Module -> the edgebox modules it imports (at any depth: a lazy import
    inside a function is a dependency all the same)."""
    modules = {}
    for path in _modules(PACKAGE):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(resolve(a.name) for a in node.names if a.name.startswith("edgebox"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*kept, *([node.module] if node.module else [])])
                if base.startswith("edgebox"):
                    found.update(resolve(f"{base}.{a.name}") for a in node.names)
        found.discard(None)
        found.discard(name)
        graph[name] = {module for module in found if module is not None}
    return graph


def test_every_import_goes_to_its_own_layer_or_below():
    upward = [
        f"{module} imports {target}"
        for module, targets in sorted(_import_graph().items())
        for target in sorted(targets)
        if _layer_of(target) > _layer_of(module)
    ]
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    graph = _import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            circle = []
            while True:
                member = stack.pop()
                circle.append(member)
                if member == node:
                    break
            if len(circle) > 1:
                circles.append(sorted(circle))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert circles == []
