"""A real rollout in progress for the dashboard tests: a python model whose
config asks for a shadow rollout, version 1 serving and version 2 (which
answers twice what version 1 does) proving itself against it, on the
in-process stack. ``rollout_samples`` is far above what a test sends and no
rollout thread judges it, so it stays in progress until a test acts."""

from __future__ import annotations

from pathlib import Path

from daemon_process import wait_for
from model_fixtures import add_python_xy

MODEL = "xy"
SAMPLES_WANTED = 1000
SHADOW_ROLLOUT = f"""
parameters {{ key: "rollout" value {{ string_value: "shadow" }} }}
parameters {{ key: "rollout_samples" value {{ string_value: "{SAMPLES_WANTED}" }} }}
"""
DOUBLING_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)
                ]
            )
            for r in requests
        ]
"""
"""Y = 2 X: every shadow answer disagrees with version 1's Y = X."""
DISAGREEMENT = "Y max |diff| 2.0 > atol 1e-05"
"""What the tensors rule says of version 2's answer to X = [1, 2]."""


def start_shadow_rollout(repository: Path, stack) -> str:
    """Loads version 1, then adds and loads version 2, which goes into a
    shadow rollout against it; the model's name."""
    model_dir = add_python_xy(repository, MODEL, config_extra=SHADOW_ROLLOUT)
    stack.repository_control.load_model(MODEL)
    (model_dir / "2").mkdir()
    (model_dir / "2" / "model.py").write_text(DOUBLING_MODEL.lstrip())
    stack.repository_control.load_model(MODEL)
    status = stack.repository_control.rollout_status(MODEL)
    assert (status["stage"], status["version"], status["serving_version"]) == ("shadow", 2, 1)
    return MODEL


def answer_requests(stack, count: int) -> None:
    """``count`` live requests to the model, each waited for until version 2
    answered its shadow copy, so none is dropped for a busy shadow."""
    for _ in range(count):
        before = stack.repository_control.rollout_status(MODEL)["samples"]
        stack.infer(MODEL)
        wait_for(
            lambda before=before: (
                stack.repository_control.rollout_status(MODEL)["samples"] > before
            ),
            10,
            what="version 2 to answer a shadow copy",
        )
