"""The demo's detector rolls out as the lane pipeline runs: a new version is
judged at its step, on the frames the pipeline sends it, by the comparison
rule in its own folder (lanes in pixels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from daemon_process import wait_for
from edgebox.lifecycle.states import ModelState
from edgebox.streams.synthetic_road import render_road
from edgebox.tensors import InferRequest, Tensor
from model_fixtures import copy_demo_repository


def _shifted_detector(version_1: Path, target: Path, shift_px: float) -> None:
    """Version 1's network with every lane x moved ``shift_px`` to the right:
    a detector export that puts lanes in the wrong place."""
    model = onnx.load(version_1 / "model.onnx")
    graph = model.graph
    output = graph.output[0].name
    for node in graph.node:
        for index, name in enumerate(node.output):
            if name == output:
                node.output[index] = "unshifted"
    offset = np.zeros(77, dtype=np.float32)
    offset[5:] = shift_px
    graph.initializer.append(numpy_helper.from_array(offset, "lane_shift"))
    graph.node.append(helper.make_node("Add", ["unshifted", "lane_shift"], [output]))
    hidden = target.parent / f".incoming-{target.name}"
    hidden.mkdir()
    onnx.save(model, hidden / "model.onnx")
    hidden.rename(target)


def _frame_requests(stack, count: int) -> None:
    for seed in range(count):
        image = render_road(seed).image
        stack.dataplane.infer(InferRequest("lane_pipeline", [Tensor("image", "UINT8", image)]))


@pytest.mark.parametrize(
    ("shift_px", "state", "reason"),
    [
        (30.0, ModelState.UNAVAILABLE, "lanes: mean point distance 30.0 px > max_px 2.0"),
        (0.5, ModelState.READY, "rollout: promoted (30/30 answers agree"),
    ],
    ids=["30px", "half_px"],
)
def test_a_detector_is_judged_by_where_its_lanes_are(
    rollout_stack, tmp_path, shift_px, state, reason
):
    repository = copy_demo_repository(tmp_path / "models")
    # Lanes are what this judges; the lane network's latency on a loaded
    # 2-core CI box swings past any ratio (latency has its own tests).
    stack = rollout_stack(watch_s=600, latency_allowance_ms=60_000)
    stack.manager.load_model("lane_pipeline")
    _frame_requests(stack, 2)
    _shifted_detector(
        repository / "lane_detector" / "1", repository / "lane_detector" / "2", shift_px
    )
    stack.manager.load_model("lane_detector")
    assert stack.state("lane_detector", 2).state is ModelState.LOADING

    def decided() -> bool:
        _frame_requests(stack, 3)
        return stack.state("lane_detector", 2).state is not ModelState.LOADING

    wait_for(decided, 120, interval_s=0, what="the detector's rollout to end")
    status = stack.state("lane_detector", 2)
    assert status.state is state
    assert reason in status.reason, status.reason
