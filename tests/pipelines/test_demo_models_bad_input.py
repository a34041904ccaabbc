"""The demo repository's python models (lane_preprocess, lane_postprocess,
multiply) and the ensembles over them, fed what a client controls and gets
wrong, over HTTP against the daemon: each mistake is a 400 saying what was
wrong (the model answers ``TritonError(..., INVALID_ARG)`` as Triton's
examples do, or the daemon refuses the request against the config first),
never a 500, and every model stays ready and keeps answering good requests."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import DaemonProcess
from edgebox.streams.synthetic_road import render_road
from model_fixtures import copy_demo_repository

PREPROCESS_TOO_SMALL = "lane_preprocess: 'image' must be a frame of at least 2x2 pixels"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-bad-input")
    repository = copy_demo_repository(root / "repo")
    daemon = DaemonProcess(repository, root / "daemon.log", ["--model-control-mode", "none"])
    with daemon, httpclient.InferenceServerClient(daemon.url) as client:
        yield client


def tensor(name: str, array: np.ndarray, datatype: str) -> httpclient.InferInput:
    item = httpclient.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array)
    return item


def refusal(client, model: str, *inputs: httpclient.InferInput) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as caught:
        client.infer(model, list(inputs))
    assert client.is_model_ready(model)
    return caught.value.status(), caught.value.message()


def frame(shape, dtype=np.uint8) -> np.ndarray:
    return np.zeros(shape, dtype)


@pytest.mark.parametrize("model", ["lane_pipeline", "lane_preprocess"])
@pytest.mark.parametrize("shape", [(0, 16, 3), (16, 0, 3), (0, 0, 3), (1, 1, 3), (1, 640, 3)])
def test_a_frame_too_small_to_resize_is_a_400(client, model, shape):
    status, message = refusal(client, model, tensor("image", frame(shape), "UINT8"))
    assert status == "400"
    assert f"{PREPROCESS_TOO_SMALL}, got shape {list(shape)}" in message


@pytest.mark.parametrize("model", ["lane_pipeline", "lane_preprocess"])
@pytest.mark.parametrize(
    ("image", "datatype", "expected"),
    [
        (frame((360, 640)), "UINT8", "expected shape [-1,-1,3], got [360,640]"),
        (frame((1, 360, 640, 3)), "UINT8", "expected shape [-1,-1,3], got [1,360,640,3]"),
        (frame((360, 640, 4)), "UINT8", "expected shape [-1,-1,3], got [360,640,4]"),
        (frame((36, 64, 3), np.float32), "FP32", "expected datatype UINT8, got FP32"),
    ],
)
def test_a_frame_of_the_wrong_rank_channels_or_datatype_is_a_400(
    client, model, image, datatype, expected
):
    status, message = refusal(client, model, tensor("image", image, datatype))
    assert (status, expected in message) == ("400", True), message


def test_frames_of_extreme_proportions_are_served(client):
    for shape in [(2, 2, 3), (2, 200_000, 3), (200_000, 2, 3)]:
        result = client.infer("lane_pipeline", [tensor("image", frame(shape), "UINT8")])
        assert result.as_numpy("lane_scores").shape == (0,)


def test_a_good_frame_still_finds_lanes_after_the_refusals(client):
    road = render_road(7)
    result = client.infer("lane_pipeline", [tensor("image", road.image, "UINT8")])
    assert len(result.as_numpy("lane_point_counts")) >= 2


def proposals(fill: float = 0.0) -> np.ndarray:
    return np.full((1, 2784, 77), fill, np.float32)


@pytest.mark.parametrize("size", [(0, 640), (360, 0), (-1, -1), (-720, 1280)])
def test_postprocess_refuses_a_frame_size_that_is_not_positive(client, size):
    status, message = refusal(
        client,
        "lane_postprocess",
        tensor("predict_lanes", proposals(), "FP32"),
        tensor("frame_size", np.array(size, np.int32), "INT32"),
    )
    assert status == "400"
    assert message.endswith(
        "lane_postprocess: 'frame_size' must be the frame's (height, width) in pixels, "
        f"both positive, got [{size[0]}, {size[1]}]"
    )


@pytest.mark.parametrize("fill", [np.nan, np.inf, -np.inf, 3e38])
def test_postprocess_finds_no_lane_in_non_finite_or_huge_proposals(client, fill):
    result = client.infer(
        "lane_postprocess",
        [
            tensor("predict_lanes", proposals(fill), "FP32"),
            tensor("frame_size", np.array([720, 1280], np.int32), "INT32"),
        ],
    )
    assert result.as_numpy("lane_scores").shape == (0,)
    assert result.as_numpy("lane_points").shape == (0, 2)


@pytest.mark.parametrize(
    ("predict_lanes", "frame_size", "expected"),
    [
        (np.zeros((1, 2784, 76), np.float32), [720, 1280], "expected shape [1,2784,77]"),
        (np.zeros((2784, 77), np.float32), [720, 1280], "expected shape [1,2784,77]"),
        (proposals(), [720], "expected shape [2], got [1]"),
        (proposals(), [720, 1280, 3], "expected shape [2], got [3]"),
    ],
)
def test_postprocess_refuses_tensors_of_the_wrong_shape(
    client, predict_lanes, frame_size, expected
):
    status, message = refusal(
        client,
        "lane_postprocess",
        tensor("predict_lanes", predict_lanes, "FP32"),
        tensor("frame_size", np.array(frame_size, np.int32), "INT32"),
    )
    assert (status, expected in message) == ("400", True), message


@pytest.mark.parametrize("model", ["multiply", "square_diff"])
@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((1, 15), "expected shape [-1,16], got [1,15]"),
        ((16,), "expected shape [-1,16], got [16]"),
        ((9, 16), "batch size 9 exceeds max_batch_size 8"),
        ((0, 16), "batch size 0; a request carries 1 to 8 items"),
    ],
)
def test_multiply_and_square_diff_refuse_a_wrong_shape_or_batch_size(
    client, model, shape, expected
):
    names = ("A", "B")
    inputs = [tensor(name, np.ones(shape, np.float32), "FP32") for name in names]
    status, message = refusal(client, model, *inputs)
    assert (status, expected in message) == ("400", True), message
