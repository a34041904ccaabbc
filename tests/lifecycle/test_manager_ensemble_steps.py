"""Model control around ensembles, as a real Triton 2.51 does it in explicit
mode (tests/triton_answers.py): an ensemble loads its steps, unloading a step
takes its ensembles down, and ``unload_dependents`` unloads only the steps
nothing else needs."""

from __future__ import annotations

import pytest

from model_fixtures import add_python_xy, write_model
from triton_answers import UNLOAD_SCENARIOS


def ensemble_config(*steps: str) -> str:
    entries = []
    source = "IN"
    for index, step in enumerate(steps):
        target = "OUT" if index == len(steps) - 1 else f"t{index}"
        entries.append(
            f'{{ model_name: "{step}" model_version: -1 '
            f'input_map {{ key: "X" value: "{source}" }} output_map {{ key: "Y" value: "{target}" }} }}'
        )
        source = target
    return f"""
        platform: "ensemble"
        input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 2 ] }} ]
        output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] }} ]
        ensemble_scheduling {{ step [ {", ".join(entries)} ] }}
        """


@pytest.fixture
def steps_repository(tmp_path):
    for name in ("a", "b"):
        add_python_xy(tmp_path, name)
    write_model(tmp_path, "ens1", ensemble_config("a", "b"), {"1/.keep": ""})
    write_model(tmp_path, "ens2", ensemble_config("a"), {"1/.keep": ""})
    return tmp_path


@pytest.mark.parametrize(
    ("actions", "ready"), UNLOAD_SCENARIOS, ids=[" then ".join(a) for a, _ in UNLOAD_SCENARIOS]
)
def test_model_control_leaves_what_triton_leaves_ready(steps_repository, stack, actions, ready):
    for action in actions:
        verb, name, *flags = action.split()
        if verb == "load":
            stack.manager.load_model(name)
        else:
            stack.manager.unload_model(name, unload_dependents=flags == ["dependents"])
    served = {name for name in stack.registry.model_names() if stack.registry.served_versions(name)}
    assert served == ready


def test_ensemble_unloaded_with_its_step_stays_unloaded_when_the_step_returns(
    steps_repository, stack
):
    stack.manager.load_model("ens1")
    stack.manager.unload_model("a")
    stack.manager.load_model("a")
    assert not stack.registry.served_versions("ens1")
    assert stack.registry.statuses("ens1")[1].reason == "unloaded"
