"""Where a version runs, as the models page says it, from its instance_group."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from edgebox.dashboard.models_view import describe_device


def config(text: str):
    return text_format.Parse(text, model_config_pb2.ModelConfig())


@pytest.mark.parametrize(
    ("text", "device"),
    [
        ('platform: "onnxruntime_onnx"', "auto"),
        ("instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]", "GPU 0"),
        ("instance_group [ { count: 2 kind: KIND_CPU } ]", "2 x CPU"),
        (
            "instance_group [ { kind: KIND_GPU secondary_devices [ "
            "{ kind: KIND_NVDLA device_id: 1 } ] } ]",
            "DLA core 1",
        ),
        (
            "instance_group [ { kind: KIND_GPU gpus: [ 0 ] }, { count: 3 kind: KIND_CPU } ]",
            "GPU 0, 3 x CPU",
        ),
        ('platform: "ensemble"', "ensemble"),
    ],
)
def test_device_follows_the_instance_group(text, device):
    assert describe_device(config(text)) == device
