"""Ensembles depend on their steps' models: load those first, and refuse an
ensemble whose steps reach itself, directly or through other ensembles. Such a
graph would never finish a request (each step calls the ensemble again), so it
is refused when it is loaded, never discovered by a client's request."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

Config = TypeVar("Config")


def composing_models(config) -> list[str]:
    if config is None or config.platform != "ensemble":
        return []
    return [step.model_name for step in config.ensemble_scheduling.step]


def with_steps(
    configs: dict[str, Config | None],
    pending: list[str],
    read: Callable[[str], Config | None],
    skip: Callable[[str], bool] = lambda name: False,
) -> dict[str, Config | None]:
    """``configs`` with the configs of ``pending`` added, and those of every
    model their ensembles compose, directly or through other ensembles: each
    model read once (``read``: None when it cannot be), and cycles end where
    they close. A model ``skip`` names is left out with what it composes.
    Extends and returns ``configs``; ``pending`` is used up."""
    while pending:
        name = pending.pop()
        if name not in configs and not skip(name):
            configs[name] = read(name)
            pending += composing_models(configs[name])
    return configs


def cycle_reason(cycle: list[str]) -> str:
    """The reason an ensemble on ``cycle`` (first and last entries the same
    model) cannot load: "ensemble 'a': steps form a cycle 'a' -> 'b' -> 'a'"."""
    chain = " -> ".join(f"'{name}'" for name in cycle)
    return f"ensemble '{cycle[0]}': steps form a cycle {chain}"


def find_cycle(name: str, config, configs: Mapping[str, object | None]) -> list[str] | None:
    """The path by which ``name``, given ``config``, reaches itself through the
    other models' ``configs`` (``configs`` may hold an older config of ``name``:
    ``config`` replaces it), e.g. ``["a", "b", "a"]``; None if it does not.

    Only cycles through ``name`` count: one among other models is theirs to
    report. Iterative, so a long chain of ensembles cannot exhaust the stack.
    """

    def steps_of(model: str) -> list[str]:
        return composing_models(config if model == name else configs.get(model))

    path = [name]
    pending = [iter(steps_of(name))]
    visited = {name}
    while pending:
        step = next(pending[-1], None)
        if step is None:
            pending.pop()
            path.pop()
            continue
        if step == name:
            return [*path, name]
        if step in visited:
            continue
        visited.add(step)
        path.append(step)
        pending.append(iter(steps_of(step)))
    return None


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
            cycle = path[path.index(name) :]
            for index, member in enumerate(cycle):
                rotated = [*cycle[index:], *cycle[:index], member]
                cyclic.setdefault(member, cycle_reason(rotated))
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


def steps_closure(names: list[str], configs: Mapping[str, object | None]) -> list[str]:
    """Every model ``names`` compose, directly or through other ensembles,
    ``names`` themselves left out; cycles end where they close."""
    found: list[str] = []
    seen = set(names)
    frontier = list(names)
    while frontier:
        for step in composing_models(configs.get(frontier.pop())):
            if step not in seen:
                seen.add(step)
                found.append(step)
                frontier.append(step)
    return found


def steps_left_unneeded(
    unloading: list[str],
    configs: Mapping[str, object | None],
    served: set[str],
    kept: set[str],
) -> list[str]:
    """The steps that unloading ``unloading`` leaves without a user, as
    Triton's ``unload_dependents`` unloads them: those no other ``served``
    model still composes and that are not in ``kept`` (models a client asked
    for by name, which stay until asked to go)."""
    candidates = [m for m in steps_closure(unloading, configs) if m not in unloading]
    roots = {m for m in served if m not in unloading and m not in candidates}
    roots |= {m for m in candidates if m in kept}
    needed = roots | set(steps_closure(sorted(roots), configs))
    return [m for m in candidates if m not in needed]
