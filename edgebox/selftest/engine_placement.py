"""Where a self-test engine's layers run, for the report: the placement note
the daemon shows when it loads such an engine, and whether that is a finding.

Two views exist (see ``engine_build/placement.py`` and
``backends/tensorrt/placement.py``): before the build, which network layers
the DLA could take (``can_run_on_DLA``); after it, the engine's own layers
from the engine inspector, after fusion, which is what really runs. The
second is shown; the first stands in when the inspector cannot tell. A DLA
engine that runs nothing on the DLA is a warning: with GPU fallback allowed
it still builds, and is a GPU engine by another name.
"""

from __future__ import annotations

from typing import Any

from edgebox.backends.tensorrt.placement import Placement
from edgebox.engine_build.placement import PlacementReport
from edgebox.selftest.report import Status


def placement_line(
    dla_core: int | None, inspected: Placement, planned: PlacementReport
) -> tuple[Status, str, dict[str, Any]]:
    """(status, detail, facts) for an engine built for ``dla_core`` (None: the GPU)."""
    network_on_dla = len(planned.layers) - len(planned.gpu_layers) if dla_core is not None else 0
    facts: dict[str, Any] = {
        "network_layers": len(planned.layers),
        "network_layers_dla_capable": network_on_dla,
    }
    if inspected.unknown_reason:
        if dla_core is None:
            return Status.PASS, f"all {len(planned.layers)} network layers on the GPU", facts
        detail = (
            f"{network_on_dla} of {len(planned.layers)} network layers can run on the DLA; "
            f"{inspected.summary()}"
        )
        return (Status.WARN if network_on_dla == 0 else Status.PASS), detail, facts
    facts.update(
        dla_layers=len(inspected.dla_layers),
        gpu_layers=len(inspected.gpu_layers),
        gpu_fallback=list(inspected.gpu_layers) if dla_core is not None else [],
    )
    detail = inspected.summary()
    if dla_core is not None and not inspected.dla_layers:
        return Status.WARN, f"{detail}: nothing runs on the DLA", facts
    return Status.PASS, detail, facts
