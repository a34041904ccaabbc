"""Configs users actually write, taken from blog posts about Triton, parse and
normalize the way Triton reads them.

The fixtures under ``fixtures/seeds/<model>/config.pbtxt`` keep each post's
whitespace and commas (``dims: [ -1 , -1, -1]``, ``dims: [365]``,
``instance_group [{ kind: KIND_CPU }]``, ``decoupled: True``). Sources: a Chinese
Triton intro (the add/sub-shaped tensorrt_plan config), a Jetson Orin lane
detection post (``laneDetect_model``), NVIDIA's Triton series part 9 (the
``inception_graphdef`` example and the ``model_transaction_policy`` snippet), a
Korean places365 ensemble post, and a custom-operations tutorial
(``model_operations``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2

from edgebox.repository.config import backend_of, parse_model_config_file
from edgebox.signature import ModelSignature

SEEDS = Path(__file__).parent / "fixtures" / "seeds"
SEED_NAMES = sorted(p.name for p in SEEDS.iterdir() if (p / "config.pbtxt").is_file())
REFUSED_SEEDS = {
    "seed_onnx_custom_ops": [
        "{path}:4:20: model_operations.op_library_filename '/path/to/libonnxcustom.so' is "
        "outside the model folder"
    ],
}
"""Seeds edgebox refuses by design, with the problems it reports: the
custom-operations tutorial loads its ONNX library from an absolute path, and
edgebox runs code only from inside the model folder (docs/security.md). The
same config naming a library inside the folder loads and answers
(tests/backends/test_onnxruntime_custom_ops.py)."""
PARSING_SEEDS = [name for name in SEED_NAMES if name not in REFUSED_SEEDS]

KIND_AUTO = model_config_pb2.ModelInstanceGroup.KIND_AUTO
KIND_CPU = model_config_pb2.ModelInstanceGroup.KIND_CPU


def parse_seed(name: str):
    """The seed's config, once it has raised exactly the problems expected of it."""
    path = SEEDS / name / "config.pbtxt"
    config, problems = parse_model_config_file(path, name)
    expected = [problem.format(path=path) for problem in REFUSED_SEEDS.get(name, [])]
    assert [str(p) for p in problems] == expected
    return config


def shapes(config) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    signature = ModelSignature.from_config(config)
    return (
        {name: spec.shape for name, spec in signature.inputs.items()},
        {name: spec.shape for name, spec in signature.outputs.items()},
    )


def test_every_seed_config_is_a_fixture() -> None:
    assert SEED_NAMES == [
        "classification_places",
        "inception_graphdef",
        "laneDetect_model",
        "places_ensemble",
        "postprocess",
        "preprocess",
        "seed_decoupled",
        "seed_onnx_custom_ops",
        "seed_tf_custom_ops",
        "seed_trt_add",
    ]


@pytest.mark.parametrize(
    ("name", "as_written"),
    [
        ("preprocess", "dims: [ -1 , -1, -1]"),
        ("preprocess", "instance_group [{ kind: KIND_CPU }]"),
        ("classification_places", "dims: [365]"),
        ("classification_places", "dynamic_batching { }"),
        ("places_ensemble", '},\n{\nmodel_name: "classification_places"'),
        ("seed_decoupled", "decoupled: True"),
        ("seed_trt_add", '},\n{\nname: "input1"'),
    ],
)
def test_seed_fixtures_keep_the_posts_spelling(name: str, as_written: str) -> None:
    assert as_written in (SEEDS / name / "config.pbtxt").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", PARSING_SEEDS)
def test_seed_config_parses_without_problems(name: str) -> None:
    config = parse_seed(name)
    assert config.name == name


def test_onnx_custom_op_seed_is_refused_for_its_library_outside_the_model_folder() -> None:
    path = SEEDS / "seed_onnx_custom_ops" / "config.pbtxt"
    _, problems = parse_model_config_file(path, "seed_onnx_custom_ops")
    assert [str(p) for p in problems] == [
        f"{path}:4:20: model_operations.op_library_filename '/path/to/libonnxcustom.so' is "
        "outside the model folder"
    ]


@pytest.mark.parametrize("name", SEED_NAMES)
def test_seed_config_gets_the_default_version_policy(name: str) -> None:
    policy = parse_seed(name).version_policy
    assert policy.WhichOneof("policy_choice") == "latest"
    assert policy.latest.num_versions == 1


def test_unnamed_tensorrt_config_takes_its_folder_name() -> None:
    config = parse_seed("seed_trt_add")
    assert config.name == "seed_trt_add"
    assert (config.platform, config.backend) == ("tensorrt_plan", "tensorrt")
    assert backend_of(config) == "tensorrt"
    assert config.default_model_filename == "model.plan"
    assert shapes(config) == (
        {"input0": (-1, 16), "input1": (-1, 16)},
        {"output0": (-1, 16)},
    )


def test_tensorrt_config_gets_one_auto_instance_by_default() -> None:
    groups = parse_seed("seed_trt_add").instance_group
    assert [(g.name, g.kind, g.count) for g in groups] == [("seed_trt_add_0", KIND_AUTO, 1)]


def test_lane_detector_shapes_include_the_batch_dim() -> None:
    config = parse_seed("laneDetect_model")
    assert config.max_batch_size == 1
    assert (config.platform, config.backend) == ("tensorrt_plan", "tensorrt")
    assert shapes(config) == (
        {"input": (-1, 3, 360, 640)},
        {"predict_lanes": (-1, 2784, 77)},
    )


def test_inception_graphdef_reads_as_the_post_explains() -> None:
    config = parse_seed("inception_graphdef")
    assert (config.platform, config.backend) == ("tensorflow_graphdef", "tensorflow")
    assert config.default_model_filename == "model.graphdef"
    assert config.max_batch_size == 128
    assert config.input[0].format == model_config_pb2.ModelInput.FORMAT_NHWC
    assert config.output[0].label_filename == "inception_labels.txt"
    assert shapes(config) == (
        {"input": (-1, 299, 299, 3)},
        {"InceptionV3/Predictions/Softmax": (-1, 1001)},
    )


def test_inception_dims_are_the_full_shape_when_max_batch_size_is_0() -> None:
    # The post: with max_batch_size 0 the full shape is "[ 299, 299, 3 ]".
    config = parse_seed("inception_graphdef")
    config.max_batch_size = 0
    assert shapes(config) == (
        {"input": (299, 299, 3)},
        {"InceptionV3/Predictions/Softmax": (1001,)},
    )


@pytest.mark.parametrize(
    ("name", "input_shape", "output_shape"),
    [
        ("preprocess", {"pre_input": (-1, -1, -1, -1)}, {"pre_output": (-1, 3, 256, 256)}),
        ("postprocess", {"post_input": (-1, 365)}, {"post_output": (-1, -1)}),
    ],
)
def test_korean_python_steps_run_on_one_cpu_instance(
    name: str, input_shape: dict, output_shape: dict
) -> None:
    config = parse_seed(name)
    assert (config.platform, config.backend) == ("", "python")
    assert backend_of(config) == "python"
    assert config.default_model_filename == "model.py"
    assert [(g.name, g.kind, g.count) for g in config.instance_group] == [
        (f"{name}_0", KIND_CPU, 1)
    ]
    assert shapes(config) == (input_shape, output_shape)


def test_classification_places_uses_the_dynamic_batcher() -> None:
    config = parse_seed("classification_places")
    assert config.name == "classification_places"
    assert backend_of(config) == "tensorrt"
    assert config.HasField("dynamic_batching")
    assert list(config.dynamic_batching.preferred_batch_size) == []
    assert config.input[0].format == model_config_pb2.ModelInput.FORMAT_NCHW
    assert shapes(config) == ({"input_0": (-1, 3, 256, 256)}, {"output_0": (-1, 365)})


def test_places_ensemble_keeps_its_steps_and_has_no_instances() -> None:
    config = parse_seed("places_ensemble")
    assert backend_of(config) == "ensemble"
    assert (config.platform, config.backend) == ("ensemble", "")
    assert list(config.instance_group) == []
    assert config.default_model_filename == ""
    steps = [
        (s.model_name, s.model_version, dict(s.input_map), dict(s.output_map))
        for s in config.ensemble_scheduling.step
    ]
    assert steps == [
        ("preprocess", -1, {"pre_input": "INPUT"}, {"pre_output": "preprocessed_image"}),
        (
            "classification_places",
            -1,
            {"input_0": "preprocessed_image"},
            {"output_0": "classification_result"},
        ),
        (
            "postprocess",
            -1,
            {"post_input": "classification_result"},
            {"post_output": "postprocess_result"},
        ),
    ]
    assert shapes(config) == ({"INPUT": (-1, -1, -1, -1)}, {"postprocess_result": (-1, -1)})


def test_decoupled_true_is_read_as_a_bool() -> None:
    config = parse_seed("seed_decoupled")
    assert config.model_transaction_policy.decoupled is True
    assert backend_of(config) == "python"
    assert shapes(config) == ({"IN": (-1,)}, {"OUT": (-1,)})


@pytest.mark.parametrize(
    ("name", "backend", "library"),
    [
        ("seed_tf_custom_ops", "tensorflow", "path/to/libtfcustom.so"),
        ("seed_onnx_custom_ops", "onnxruntime", "/path/to/libonnxcustom.so"),
    ],
)
def test_model_operations_name_their_library(name: str, backend: str, library: str) -> None:
    config = parse_seed(name)
    assert backend_of(config) == backend
    assert list(config.model_operations.op_library_filename) == [library]
    assert shapes(config) == ({"x": (4,)}, {"y": (4,)})
