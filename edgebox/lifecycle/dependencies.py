"""Ensembles depend on their steps' models: load those first, and refuse an
ensemble whose steps are missing or which (through nested ensembles) contains
itself."""

from __future__ import annotations

from collections.abc import Mapping


def composing_models(config) -> list[str]:
    if config is None or config.platform != "ensemble":
        return []
    return [step.model_name for step in config.ensemble_scheduling.step]


def load_order(configs: Mapping[str, object | None]) -> tuple[list[str], dict[str, str]]:
    """Names ordered so every ensemble comes after the models it composes, and
    a reason for each model that can never load because of a cycle."""
    order: list[str] = []
    cyclic: dict[str, str] = {}
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = [*path[path.index(name) :], name]
            text = " -> ".join(f"'{n}'" for n in cycle)
            for member in cycle:
                cyclic.setdefault(member, f"ensemble dependency cycle: {text}")
            return
        state[name] = 1
        for dependency in composing_models(configs.get(name)):
            if dependency in configs:
                visit(dependency, [*path, name])
        state[name] = 2
        order.append(name)

    for name in sorted(configs):
        visit(name, [])
    return [n for n in order if n not in cyclic], cyclic


def dependents_of(name: str, configs: Mapping[str, object | None]) -> list[str]:
    """Ensembles that (directly or through other ensembles) use ``name``."""
    found: list[str] = []
    frontier = [name]
    while frontier:
        current = frontier.pop()
        for candidate, config in configs.items():
            if candidate not in found and current in composing_models(config):
                found.append(candidate)
                frontier.append(candidate)
    return found
