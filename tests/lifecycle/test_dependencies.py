"""Ensemble graphs: composing models load first, and a graph that reaches itself
is found before anything loads."""

from __future__ import annotations

from google.protobuf import text_format

from edgebox.lifecycle.dependencies import (
    cycle_reason,
    find_cycle,
    load_order,
    steps_closure,
    steps_left_unneeded,
)
from edgebox.repository.config import ModelConfig


def ensemble(*steps: str) -> ModelConfig:
    entries = ", ".join(f'{{ model_name: "{step}" model_version: -1 }}' for step in steps)
    text = f'platform: "ensemble" ensemble_scheduling {{ step [ {entries} ] }}'
    return text_format.Parse(text, ModelConfig())


def python_model() -> ModelConfig:
    return text_format.Parse('backend: "python"', ModelConfig())


def test_ensemble_whose_step_is_itself_is_a_cycle():
    assert find_cycle("a", ensemble("echo", "a"), {"echo": python_model()}) == ["a", "a"]


def test_cycle_through_another_ensemble_is_found_from_the_new_config():
    others = {"b": ensemble("c"), "c": ensemble("a", "echo"), "echo": python_model()}
    assert find_cycle("a", ensemble("echo", "b"), others) == ["a", "b", "c", "a"]


def test_the_new_config_replaces_the_known_one_of_the_same_name():
    others = {"a": ensemble("b"), "b": ensemble("echo")}
    assert find_cycle("b", ensemble("echo"), others) is None
    assert find_cycle("b", ensemble("a"), others) == ["b", "a", "b"]


def test_shared_steps_and_unknown_models_are_not_cycles():
    others = {"left": ensemble("echo"), "right": ensemble("echo"), "echo": python_model()}
    assert find_cycle("diamond", ensemble("left", "right", "absent"), others) is None


def test_a_cycle_it_does_not_belong_to_is_not_its_cycle():
    others = {"b": ensemble("c"), "c": ensemble("b")}
    assert find_cycle("a", ensemble("b"), others) is None


def test_cycle_reason_names_the_ensemble_and_the_cycle():
    assert cycle_reason(["a", "b", "a"]) == "ensemble 'a': steps form a cycle 'a' -> 'b' -> 'a'"


def test_load_order_names_the_cycle_from_each_member():
    configs = {"loop_a": ensemble("loop_b"), "loop_b": ensemble("loop_a"), "echo": python_model()}
    order, cyclic = load_order(configs)
    assert order == ["echo"]
    assert cyclic == {
        "loop_a": "ensemble 'loop_a': steps form a cycle 'loop_a' -> 'loop_b' -> 'loop_a'",
        "loop_b": "ensemble 'loop_b': steps form a cycle 'loop_b' -> 'loop_a' -> 'loop_b'",
    }


def test_steps_closure_follows_nested_ensembles_once():
    configs = {"top": ensemble("mid", "a"), "mid": ensemble("a", "b"), "a": python_model()}
    assert sorted(steps_closure(["top"], configs)) == ["a", "b", "mid"]


def test_unneeded_steps_spare_those_another_served_model_composes():
    configs = {"e1": ensemble("a", "b"), "e2": ensemble("a"), "a": python_model()}
    served = {"e1", "e2", "a", "b"}
    assert steps_left_unneeded(["e1"], configs, served, kept=set()) == ["b"]


def test_unneeded_steps_spare_those_loaded_by_name_and_their_own_steps():
    configs = {"e1": ensemble("mid", "c"), "mid": ensemble("a"), "a": python_model()}
    served = {"e1", "mid", "a", "c"}
    assert steps_left_unneeded(["e1"], configs, served, kept={"mid"}) == ["c"]


def test_unneeded_steps_of_a_nested_ensemble_go_with_it():
    configs = {"e1": ensemble("mid"), "mid": ensemble("a"), "a": python_model()}
    served = {"e1", "mid", "a"}
    assert sorted(steps_left_unneeded(["e1"], configs, served, kept=set())) == ["a", "mid"]
