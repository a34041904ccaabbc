"""The two models the bench serves, the repository it writes for them, and the
one request each is measured with.

``add_sub`` (two [1, 16] FP32 tensors in, two out) is all overhead: it shows
what the protocol and the server cost per request. The LaneATT-shaped model
(one [1, 3, 360, 640] FP32 image in, [1, 2784, 77] out) is what an edge camera
pipeline sends: about 2.7 MB up and 0.8 MB back per request.
"""

from __future__ import annotations

import http.client
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from scripts.onnx_builders import (  # noqa: E402
    LANE_ANCHORS,
    LANE_INPUT_SHAPE,
    LANE_VALUES,
    build_add_sub,
    build_lane_model,
)

ADD_SUB_CONFIG = """\
name: "add_sub"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

LANE_CONFIG = f"""\
name: "lane"
platform: "onnxruntime_onnx"
max_batch_size: 1
input [
  {{ name: "input" data_type: TYPE_FP32 dims: [ {", ".join(map(str, LANE_INPUT_SHAPE))} ] }}
]
output [
  {{ name: "predict_lanes" data_type: TYPE_FP32 dims: [ {LANE_ANCHORS}, {LANE_VALUES} ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


@dataclass
class Workload:
    """One model as the bench sees it: where its file is, the request it sends
    (as numpy feeds and as tritonclient objects), and that request's body sizes."""

    name: str
    model_path: Path
    feeds: dict[str, np.ndarray]
    output_names: list[str]
    request_bytes: int = 0
    """HTTP request body: the JSON header plus the binary tensors."""
    response_bytes: int = 0
    """HTTP response body, likewise."""
    output_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Each output's shape (FP32), for clients that give the server a region
    to write outputs into (``bench/transports.py``'s shared memory)."""

    def triton_inputs(self) -> list[httpclient.InferInput]:
        inputs = []
        for name, array in self.feeds.items():
            tensor = httpclient.InferInput(name, list(array.shape), "FP32")
            tensor.set_data_from_numpy(array, binary_data=True)
            inputs.append(tensor)
        return inputs

    def triton_outputs(self) -> list[httpclient.InferRequestedOutput]:
        return [httpclient.InferRequestedOutput(n, binary_data=True) for n in self.output_names]

    def measure_body_sizes(self, url: str) -> None:
        """Send the exact body tritonclient builds once, without the client, and
        keep both body sizes: the socket floor carries the same byte counts."""
        body, json_size = httpclient.InferenceServerClient.generate_request_body(
            self.triton_inputs(), outputs=self.triton_outputs()
        )
        host, port = url.rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            connection.request(
                "POST",
                f"/v2/models/{self.name}/infer",
                body=body,
                headers={"Inference-Header-Content-Length": str(json_size)},
            )
            reply = connection.getresponse()
            answer = reply.read()
        finally:
            connection.close()
        if reply.status != 200:
            raise RuntimeError(
                f"model '{self.name}': infer answered {reply.status}: {answer[:300]!r}"
            )
        self.request_bytes = len(body)
        self.response_bytes = len(answer)


def write_repository(root: Path) -> dict[str, Workload]:
    """A fresh model repository under ``root`` with ``add_sub`` and ``lane``."""
    root.mkdir(parents=True, exist_ok=True)
    add_sub_path = build_add_sub(root / "add_sub" / "1" / "model.onnx")
    (root / "add_sub" / "config.pbtxt").write_text(ADD_SUB_CONFIG)
    lane_path = build_lane_model(root / "lane" / "1" / "model.onnx")
    (root / "lane" / "config.pbtxt").write_text(LANE_CONFIG)

    pattern = np.arange(16, dtype=np.float32).reshape(1, 16)
    image = np.random.default_rng(7).random((1, *LANE_INPUT_SHAPE), dtype=np.float32)
    return {
        "add_sub": Workload(
            "add_sub",
            add_sub_path,
            {"INPUT0": pattern, "INPUT1": np.ones((1, 16), dtype=np.float32)},
            ["OUTPUT0", "OUTPUT1"],
            output_shapes={"OUTPUT0": (1, 16), "OUTPUT1": (1, 16)},
        ),
        "lane": Workload(
            "lane",
            lane_path,
            {"input": image},
            ["predict_lanes"],
            output_shapes={"predict_lanes": (1, LANE_ANCHORS, LANE_VALUES)},
        ),
    }
