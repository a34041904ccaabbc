"""``platform: "ensemble"``: the steps of ``ensemble_scheduling`` must form
a pipeline that can finish, checked on the config alone: every step names one
model folder, no tensor is written twice, every tensor read is an ensemble
input or a step's output, every ensemble input is read and every output
written, and the steps form no cycle among themselves. An ensemble has no
instances of its own (no ``instance_group``, no ``optimization``). Cycles
through other models' configs are the lifecycle's to find
(``lifecycle/dependencies.py``), when those configs are known.

Pure functions over the parsed config, like the other rules
(``config_rules.py``): each problem is a (field path, message) pair.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/architecture.md#ensemble-models
"""

from __future__ import annotations

from edgebox.repository.config_locator import Problem
from edgebox.repository.names import model_name_problem


def check_ensemble(config) -> list[Problem]:
    problems: list[Problem] = []
    if config.instance_group:
        problems.append(
            ("instance_group", "an ensemble cannot have instance_group; its steps' models do")
        )
    if config.HasField("optimization"):
        # Triton 2.51's words (tests/triton_answers.py, PYTHON_OPTIMIZATION).
        problems.append(
            (
                "optimization",
                f"optimization should not be specified for ensemble '{config.name}'; "
                "its steps' models can have it",
            )
        )
    steps = config.ensemble_scheduling.step
    if not steps:
        problems.append(("platform", "ensemble needs ensemble_scheduling with at least one step"))
        return problems
    ensemble_inputs = {t.name for t in config.input}
    producer: dict[str, int] = {}
    for index, step in enumerate(steps):
        where = f"ensemble_scheduling.step[{index}]"
        if not step.model_name:
            problems.append((where, f"ensemble step #{index} has no model_name"))
        elif (name_problem := model_name_problem(step.model_name)) is not None:
            problems.append((f"{where}.model_name", f"ensemble step #{index}: {name_problem}"))
        if not step.input_map:
            problems.append(
                (where, f"ensemble step #{index} ('{step.model_name}') has an empty input_map")
            )
        for tensor in step.output_map.values():
            if tensor in ensemble_inputs:
                problems.append(
                    (
                        where,
                        f"ensemble step '{step.model_name}' writes '{tensor}', "
                        "which is an ensemble input",
                    )
                )
            elif tensor in producer:
                first = steps[producer[tensor]].model_name
                problems.append(
                    (
                        where,
                        f"ensemble tensor '{tensor}' is written by both '{first}' "
                        f"and '{step.model_name}'",
                    )
                )
            else:
                producer[tensor] = index
    consumed: set[str] = set()
    for index, step in enumerate(steps):
        for model_input, tensor in step.input_map.items():
            consumed.add(tensor)
            if tensor not in ensemble_inputs and tensor not in producer:
                problems.append(
                    (
                        f"ensemble_scheduling.step[{index}].input_map",
                        f"ensemble step '{step.model_name}' input '{model_input}' reads "
                        f"'{tensor}', which is neither an ensemble input nor any step's output",
                    )
                )
    for index, tensor in enumerate(config.output):
        if tensor.name not in producer:
            problems.append(
                (
                    f"output[{index}].name",
                    f"ensemble output '{tensor.name}' is not written by any step",
                )
            )
    for index, tensor in enumerate(config.input):
        if tensor.name not in consumed:
            problems.append(
                (f"input[{index}].name", f"ensemble input '{tensor.name}' is not read by any step")
            )
    cycle = _find_cycle(steps, producer)
    if cycle:
        names = " -> ".join(f"'{steps[i].model_name}'" for i in cycle)
        problems.append(("ensemble_scheduling", f"ensemble steps form a cycle: {names}"))
    return problems


def _find_cycle(steps, producer: dict[str, int]) -> list[int] | None:
    edges = {
        index: sorted({producer[t] for t in step.input_map.values() if t in producer})
        for index, step in enumerate(steps)
    }
    state: dict[int, int] = {}
    path: list[int] = []

    def visit(node: int) -> list[int] | None:
        state[node] = 1
        path.append(node)
        for upstream in edges[node]:
            if state.get(upstream) == 1:
                return [*path[path.index(upstream) :], upstream]
            if upstream not in state:
                found = visit(upstream)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in edges:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None
