"""streams/ sits beside the transports (STYLE.md, "Layering"): it reaches
models only through the dataplane, and only the composition root runs it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "edgebox"
STREAMS = PACKAGE / "streams"
BELOW_THE_DATAPLANE = (
    "edgebox.lifecycle",
    "edgebox.scheduling",
    "edgebox.backends",
    "edgebox.repository",
    "edgebox.protocol",
)


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def importers(paths, wanted) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in paths
        for name in sorted(imports(path))
        if any(name == w or name.startswith(w + ".") for w in wanted)
    ]


def test_streams_reach_models_only_through_the_dataplane():
    assert importers(sorted(STREAMS.rglob("*.py")), BELOW_THE_DATAPLANE) == []


def test_only_the_daemon_runs_streams_and_settings_only_parse_sources():
    """The dashboard may read each stream's latest frame and health report,
    and check a name against the settings' rule; the self-test opens each
    configured source once, as a stream would; nothing else."""
    outside = [p for p in sorted(PACKAGE.rglob("*.py")) if STREAMS not in p.parents]
    dashboard = [line for line in importers(outside, ("edgebox.streams",)) if "dashboard/" in line]
    readable = ("latest_frames", "health", "settings")
    assert all(line.rpartition(".")[2] in readable for line in dashboard), dashboard
    assert [line for line in importers(outside, ("edgebox.streams",)) if line not in dashboard] == [
        "edgebox/daemon.py imports edgebox.streams.manager",
        "edgebox/mqtt/bridge.py imports edgebox.streams.settings",
        "edgebox/selftest/cameras.py imports edgebox.streams.frame_source",
        "edgebox/selftest/cameras.py imports edgebox.streams.hardware_decode",
        "edgebox/selftest/cameras.py imports edgebox.streams.opencv_source",
        "edgebox/selftest/cameras.py imports edgebox.streams.settings",
        "edgebox/selftest/cameras.py imports edgebox.streams.source_spec",
        "edgebox/selftest/cameras.py imports edgebox.streams.sources",
        "edgebox/settings/top_level.py imports edgebox.streams.settings",
    ]
