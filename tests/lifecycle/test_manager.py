"""The lifecycle manager with real backends: load before swap, drain before
close, a bad version never takes down a good one."""

from __future__ import annotations

import shutil
import textwrap
import threading

import numpy as np
import pytest
from google.protobuf import json_format, text_format

from daemon_process import wait_for
from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable
from edgebox.lifecycle.states import ModelState, VersionStatus
from edgebox.repository.config import ModelConfig
from fakes import blocking_gate
from model_fixtures import PYTHON_XY_CONFIG, add_add_sub, write_model

GATED_ECHO = """
import triton_python_backend_utils as pb_utils
from fakes import blocking_gate


class TritonPythonModel:
    def initialize(self, args):
        self.version = args["model_version"]

    def execute(self, requests):
        blocking_gate.entered.set()
        assert blocking_gate.release.wait(10), "test never released the gate"
        x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x)])]

    def finalize(self):
        blocking_gate.finalized.append(self.version)
"""

ECHO = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x * 2)]))
        return out
"""


def test_reload_keeps_inflight_requests(tmp_path, stack):
    write_model(
        tmp_path, "gated", PYTHON_XY_CONFIG.format(name="gated"), {"1/model.py": GATED_ECHO}
    )
    stack.manager.load_model("gated")
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(response=stack.infer("gated")))
    worker.start()
    assert blocking_gate.entered.wait(10)

    write_model(tmp_path, "gated", PYTHON_XY_CONFIG.format(name="gated"), {"2/model.py": ECHO})
    stack.manager.load_model("gated")
    assert stack.infer("gated").model_version == "2"
    assert blocking_gate.finalized == [], "version 1 closed while a request was inside it"

    blocking_gate.release.set()
    worker.join(10)
    assert result["response"].model_version == "1"
    np.testing.assert_array_equal(result["response"].outputs[0].data, [1.0, 2.0])
    wait_for(
        lambda: blocking_gate.finalized == ["1"], what="version 1 to be finalized after draining"
    )


def test_bad_new_version_keeps_the_good_one_serving(tmp_path, stack):
    write_model(tmp_path, "echo", PYTHON_XY_CONFIG.format(name="echo"), {"1/model.py": ECHO})
    stack.manager.load_model("echo")
    write_model(
        tmp_path, "echo", PYTHON_XY_CONFIG.format(name="echo"), {"2/model.py": "def broken(:\n"}
    )
    with pytest.raises(
        Unavailable,
        match=r"model 'echo': .*SyntaxError.*model.py line 1.*still serving version\(s\) \[1\]",
    ):
        stack.manager.load_model("echo")
    assert stack.infer("echo").model_version == "1"
    statuses = stack.registry.statuses("echo")
    assert statuses[2].state is ModelState.UNAVAILABLE
    assert "SyntaxError" in statuses[2].reason
    assert statuses[1].state is ModelState.READY

    write_model(tmp_path, "echo", PYTHON_XY_CONFIG.format(name="echo"), {"2/model.py": ECHO})
    stack.manager.load_model("echo")
    assert stack.infer("echo").model_version == "2"
    wait_for(
        lambda: stack.registry.statuses("echo")[1].state is ModelState.UNAVAILABLE,
        what="v1 unloaded",
    )


def test_unchanged_versions_are_not_reloaded(tmp_path, stack):
    add_add_sub(tmp_path, "add_sub")
    stack.manager.load_model("add_sub")
    first = stack.registry.get("add_sub")
    stack.manager.load_model("add_sub")
    assert stack.registry.get("add_sub") is first


def test_config_change_reloads_load_then_swap(tmp_path, stack):
    add_add_sub(tmp_path, "add_sub")
    stack.manager.load_model("add_sub")
    first = stack.registry.get("add_sub")
    config = (
        (tmp_path / "add_sub" / "config.pbtxt")
        .read_text()
        .replace("max_batch_size: 8", "max_batch_size: 4")
    )
    (tmp_path / "add_sub" / "config.pbtxt").write_text(config)
    stack.manager.load_model("add_sub")
    second = stack.registry.get("add_sub")
    assert second is not first
    assert second.config.max_batch_size == 4
    states = []
    while (event := stack.events.get(timeout=0.5)) is not None:
        states.append((event.version, event.state))
    reload_states = states[states.index((1, "READY")) + 1 :]
    assert reload_states[:2] == [(1, "LOADING"), (1, "READY")]


def test_broken_config_keeps_serving_and_reports(tmp_path, stack):
    add_add_sub(tmp_path, "add_sub")
    stack.manager.load_model("add_sub")
    (tmp_path / "add_sub" / "config.pbtxt").write_text(
        'name: "add_sub"\nplatform: "onnxruntime_onnx"\nmax_batch_size: eight\n'
    )
    with pytest.raises(
        EdgeboxError,
        match=r"config.pbtxt:3:17: 'max_batch_size: eight': Couldn't parse integer: eight",
    ):
        stack.manager.load_model("add_sub")
    assert stack.registry.is_ready("add_sub")
    assert "config.pbtxt:3:17" in stack.registry.statuses("add_sub")[None].reason


def test_ensemble_with_missing_step_model_is_unavailable(tmp_path, stack):
    write_model(
        tmp_path,
        "pipe",
        """
        name: "pipe"
        platform: "ensemble"
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
        ensemble_scheduling { step [ {
            model_name: "absent" model_version: -1
            input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" } } ] }
        """,
        {"1/.keep": ""},
    )
    stack.manager.load_models()
    reason = stack.registry.statuses("pipe")[1].reason
    assert (
        reason
        == "model 'pipe' version 1: ensemble step model 'absent' is not available: "
        "Request for unknown model: 'absent' is not found"
    )


def test_ensemble_dependencies_load_first_and_cycles_are_refused(tmp_path, stack):
    write_model(
        tmp_path,
        "a_pipe",
        """
        platform: "ensemble"
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
        ensemble_scheduling { step [ { model_name: "z_echo" model_version: -1
            input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" } } ] }
        """,
        {"1/.keep": ""},
    )
    write_model(tmp_path, "z_echo", PYTHON_XY_CONFIG.format(name="z_echo"), {"1/model.py": ECHO})
    for name, other in (("loop_a", "loop_b"), ("loop_b", "loop_a")):
        write_model(
            tmp_path,
            name,
            f"""
            platform: "ensemble"
            input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 2 ] }} ]
            output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] }} ]
            ensemble_scheduling {{ step [ {{ model_name: "{other}" model_version: -1
                input_map {{ key: "IN" value: "IN" }} output_map {{ key: "OUT" value: "OUT" }} }} ] }}
            """,
            {"1/.keep": ""},
        )
    stack.manager.load_models()
    response = stack.infer("a_pipe", input_name="IN")
    np.testing.assert_array_equal(response.outputs[0].data, [2.0, 4.0])
    assert (
        stack.registry.statuses("loop_a")[None].reason
        == "ensemble 'loop_a': steps form a cycle 'loop_a' -> 'loop_b' -> 'loop_a'"
    )


def test_ensemble_loads_once_its_missing_step_model_arrives(tmp_path, stack):
    write_model(
        tmp_path,
        "pipe",
        """
        name: "pipe"
        platform: "ensemble"
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
        ensemble_scheduling { step [ { model_name: "late" model_version: -1
            input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" } } ] }
        """,
        {"1/.keep": ""},
    )
    stack.manager.load_models()
    assert stack.registry.statuses("pipe")[1].state is ModelState.UNAVAILABLE

    write_model(tmp_path, "late", PYTHON_XY_CONFIG.format(name="late"), {"1/model.py": ECHO})
    stack.manager.load_model("late")
    response = stack.infer("pipe", input_name="IN")
    np.testing.assert_array_equal(response.outputs[0].data, [2.0, 4.0])


def test_ready_version_carries_the_backends_notes(tmp_path, stack, monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    model_dir = add_add_sub(tmp_path, "gpu_wanted")
    config = model_dir / "config.pbtxt"
    config.write_text(config.read_text() + "instance_group [ { kind: KIND_GPU } ]\n")
    stack.manager.load_model("gpu_wanted")
    status = stack.registry.statuses("gpu_wanted")[1]
    assert status.state is ModelState.READY
    assert (
        status.reason == "CUDA execution provider not in this onnxruntime build; running on the CPU"
    )


def _loading_events(stack, version: int) -> int:
    count = 0
    while (event := stack.events.get(timeout=0.05)) is not None:
        count += event.version == version and event.state == "LOADING"
    return count


ALL_POLICY = PYTHON_XY_CONFIG.format(name="multi") + "version_policy: { all { } }\n"


def test_removed_version_stops_serving_even_while_another_is_broken(tmp_path, stack):
    write_model(tmp_path, "multi", ALL_POLICY, {"1/model.py": ECHO, "2/model.py": ECHO, "3/model.py": "def broken(:\n"})
    with pytest.raises(Unavailable):
        stack.manager.load_model("multi")
    assert stack.registry.is_ready("multi", "2")
    shutil.rmtree(tmp_path / "multi" / "2")
    with pytest.raises(Unavailable):
        stack.manager.load_model("multi")
    assert not stack.registry.is_ready("multi", "2")
    assert stack.registry.is_ready("multi", "1")
    assert stack.manager.wait_retired(10)
    assert 2 not in stack.registry.statuses("multi"), "a removed version came back in the index"


def test_a_failed_version_is_retried_only_when_its_files_change(tmp_path, stack):
    write_model(tmp_path, "multi", ALL_POLICY, {"1/model.py": ECHO, "3/model.py": "def broken(:\n"})
    with pytest.raises(Unavailable):
        stack.manager.load_model("multi")
    assert _loading_events(stack, 3) == 1
    (tmp_path / "multi" / "2").mkdir()
    (tmp_path / "multi" / "2" / "model.py").write_text(textwrap.dedent(ECHO))
    with pytest.raises(Unavailable, match="SyntaxError"):
        stack.manager.load_model("multi")
    assert stack.registry.is_ready("multi", "2")
    assert _loading_events(stack, 3) == 0, "the unchanged broken version was loaded again"
    with pytest.raises(Unavailable):
        stack.manager.load_model("multi", retry_failed=True)
    assert _loading_events(stack, 3) == 1
    (tmp_path / "multi" / "3" / "model.py").write_text(textwrap.dedent(ECHO))
    stack.manager.load_model("multi")
    assert stack.registry.is_ready("multi", "3")


def _ensemble(name: str, step: str) -> str:
    return f"""
        name: "{name}"
        platform: "ensemble"
        input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 2 ] }} ]
        output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] }} ]
        ensemble_scheduling {{ step [ {{ model_name: "{step}" model_version: -1
            input_map {{ key: "{'X' if step == 'echo' else 'IN'}" value: "IN" }}
            output_map {{ key: "{'Y' if step == 'echo' else 'OUT'}" value: "OUT" }} }} ] }}
        """


def _override(text: str) -> dict:
    config = text_format.Parse(textwrap.dedent(text), ModelConfig())
    return {"config": json_format.MessageToJson(config)}


def _serving_pipeline(tmp_path, stack) -> None:
    """'echo' (python), 'inner' -> echo, 'outer' -> inner, all serving."""
    write_model(tmp_path, "echo", PYTHON_XY_CONFIG.format(name="echo"), {"1/model.py": ECHO})
    write_model(tmp_path, "inner", _ensemble("inner", "echo"), {"1/.keep": ""})
    write_model(tmp_path, "outer", _ensemble("outer", "inner"), {"1/.keep": ""})
    stack.manager.load_models()
    np.testing.assert_array_equal(stack.infer("outer", input_name="IN").outputs[0].data, [2.0, 4.0])


def _unchanged(stack, name: str, before) -> None:
    assert stack.registry.statuses(name) == before
    np.testing.assert_array_equal(stack.infer(name, input_name="IN").outputs[0].data, [2.0, 4.0])


def test_ensemble_override_whose_step_is_itself_is_refused_and_changes_nothing(tmp_path, stack):
    _serving_pipeline(tmp_path, stack)
    before = stack.registry.statuses("inner")
    with pytest.raises(InvalidArgument) as info:
        stack.repository_control.load_model("inner", _override(_ensemble("inner", "inner")))
    assert str(info.value) == (
        "load failed for model 'inner': ensemble 'inner': steps form a cycle 'inner' -> 'inner'"
    )
    _unchanged(stack, "inner", before)
    assert stack.manager.config_of("inner").ensemble_scheduling.step[0].model_name == "echo"


def test_ensemble_override_reaching_itself_through_another_ensemble_is_refused(tmp_path, stack):
    _serving_pipeline(tmp_path, stack)
    before = stack.registry.statuses("inner")
    with pytest.raises(InvalidArgument) as info:
        stack.repository_control.load_model("inner", _override(_ensemble("inner", "outer")))
    assert str(info.value) == (
        "load failed for model 'inner': ensemble 'inner': steps form a cycle "
        "'inner' -> 'outer' -> 'inner'"
    )
    _unchanged(stack, "inner", before)
    _unchanged(stack, "outer", stack.registry.statuses("outer"))


def test_ensemble_edited_on_disk_into_a_cycle_is_unavailable_and_the_old_one_serves(tmp_path, stack):
    _serving_pipeline(tmp_path, stack)
    write_model(tmp_path, "inner", _ensemble("inner", "outer"))
    with pytest.raises(InvalidArgument):
        stack.manager.load_model("inner")
    reason = "ensemble 'inner': steps form a cycle 'inner' -> 'outer' -> 'inner'"
    assert stack.registry.statuses("inner")[None] == VersionStatus(ModelState.UNAVAILABLE, reason)
    np.testing.assert_array_equal(stack.infer("outer", input_name="IN").outputs[0].data, [2.0, 4.0])


GROUPS = "instance_group [ {{ kind: KIND_CPU count: {count} }} ]\n"


def _python_model(tmp_path, name: str, instances: int, versions: tuple[int, ...] = (1,)) -> None:
    write_model(
        tmp_path,
        name,
        PYTHON_XY_CONFIG.format(name=name) + GROUPS.format(count=instances),
        {f"{version}/model.py": ECHO for version in versions},
    )


def test_instances_over_the_per_model_cap_are_refused(tmp_path, limited_stack):
    stack = limited_stack(max_instances_per_model=2)
    _python_model(tmp_path, "many", 3)
    expected = (
        "model 'many': instance_group asks for 3 instances, more than the 2 allowed per model "
        "(setting 'max_instances_per_model')"
    )
    with pytest.raises(InvalidArgument) as info:
        stack.manager.load_model("many")
    assert str(info.value) == expected
    assert stack.registry.statuses("many") == {None: VersionStatus(ModelState.UNAVAILABLE, expected)}


def test_instance_override_over_the_cap_is_refused_before_counting_them(tmp_path, limited_stack):
    stack = limited_stack()
    _python_model(tmp_path, "many", 1)
    stack.manager.load_model("many")
    override = _override(PYTHON_XY_CONFIG.format(name="many") + GROUPS.format(count=10**9))
    with pytest.raises(InvalidArgument, match=r"^load failed for model 'many': instance_group asks for 1000000000 "):
        stack.repository_control.load_model("many", override)
    assert stack.registry.statuses("many") == {1: VersionStatus(ModelState.READY)}


def test_instances_over_the_total_cap_wait_for_others_to_close(tmp_path, limited_stack):
    stack = limited_stack(max_instances_total=3)
    _python_model(tmp_path, "first", 2)
    _python_model(tmp_path, "second", 2)
    stack.manager.load_model("first")
    with pytest.raises(Unavailable):
        stack.manager.load_model("second")
    assert stack.registry.statuses("second")[1].reason == (
        "model 'second' version 1: instance_group asks for 2 instances, but 2 of the 3 allowed "
        "in all are in use (setting 'max_instances_total')"
    )
    stack.manager.unload_model("first")
    assert stack.manager.wait_retired(10)
    stack.repository_control.load_model("second")
    assert stack.registry.is_ready("second")


def test_a_reload_does_not_count_the_versions_it_replaces(tmp_path, limited_stack):
    stack = limited_stack(max_instances_total=3)
    _python_model(tmp_path, "big", 2)
    stack.manager.load_model("big")
    _python_model(tmp_path, "big", 2, versions=(2,))
    stack.manager.load_model("big")
    assert stack.infer("big").model_version == "2"
    assert stack.manager.wait_retired(10)
    _python_model(tmp_path, "small", 1)
    stack.manager.load_model("small")
    _python_model(tmp_path, "other", 1)
    with pytest.raises(Unavailable, match="but 3 of the 3 allowed in all are in use"):
        stack.manager.load_model("other")


def test_onnx_thread_counts_over_the_cap_are_refused(tmp_path, limited_stack):
    stack = limited_stack(max_threads_per_instance=2)
    model_dir = add_add_sub(tmp_path, "threads")
    config = model_dir / "config.pbtxt"
    config.write_text(
        config.read_text()
        + 'parameters { key: "inter_op_thread_count" value: { string_value: "3" } }\n'
    )
    # The config asked for what it may not have: the caller's mistake (400), not a
    # server that is unavailable.
    with pytest.raises(InvalidArgument):
        stack.manager.load_model("threads")
    assert stack.registry.statuses("threads")[1].reason == (
        "model 'threads' version 1: parameter 'inter_op_thread_count' is 3, more than the 2 "
        "threads allowed per instance (setting 'max_threads_per_instance')"
    )
