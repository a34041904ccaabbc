"""A model's outputs as a small JSON-able summary: what a stream result or a
model result carries to MQTT and the dashboard, never the raw tensors.

How a model's outputs are summarised is a rule its own ``config.pbtxt`` names,
``parameters { key: "result_summary" value { string_value: "lanes" } }``, so
nothing generic knows one model's outputs: ``tensors`` (the default) gives
small outputs whole and large ones by datatype and shape; ``lanes`` decodes a
lane detector's points into lanes first. A new kind of model adds a rule here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgebox.summaries.lanes import summarize_lanes
from edgebox.summaries.tensors import SummaryError, summarize_tensors
from edgebox.tensors import Tensor

RULE_PARAMETER = "result_summary"
DEFAULT_RULE = "tensors"
RULES: dict[str, Callable[[list[Tensor]], dict[str, Any]]] = {
    "tensors": summarize_tensors,
    "lanes": summarize_lanes,
}

__all__ = ["DEFAULT_RULE", "RULES", "RULE_PARAMETER", "SummaryError", "rule_of", "summarize"]


def rule_of(config) -> str:
    """The rule a model config names (``DEFAULT_RULE`` if none). An unknown
    name is refused when the model loads (see ``rule_problem``)."""
    entry = config.parameters.get(RULE_PARAMETER) if config is not None else None
    return entry.string_value if entry is not None and entry.string_value else DEFAULT_RULE


def rule_problem(config) -> str | None:
    """Why the config's ``result_summary`` cannot be used, or None."""
    name = rule_of(config)
    if name in RULES:
        return None
    return (
        f"parameter '{RULE_PARAMETER}': unknown rule '{name}' "
        f"(expected one of {', '.join(sorted(RULES))})"
    )


def summarize(outputs: list[Tensor], rule: str = DEFAULT_RULE) -> dict[str, Any]:
    """SummaryError when the outputs contradict the rule (e.g. lane counts
    that do not add up)."""
    return RULES.get(rule, summarize_tensors)(outputs)
