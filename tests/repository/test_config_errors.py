"""A bad ``config.pbtxt`` is reported as ``path:line:col: message``, the line
and column being where the offending field is written, so a user can jump
straight to it. Syntax errors come from protobuf's parser; semantic ones are
located through the field index (``config_locator.py``).

Each config below is written exactly as the file reads (``textwrap.dedent``),
so the expected line and column can be checked by eye.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from edgebox.errors import ConfigError, ErrorCode
from edgebox.repository.config import (
    config_from_json,
    config_to_dict,
    parse_model_config_file,
    read_model_config,
)


def write_config(root: Path, text: str, folder: str = "m") -> Path:
    path = root / folder / "config.pbtxt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def parse_failure(root: Path, text: str, folder: str = "m") -> tuple[Path, ConfigError]:
    path = write_config(root, text, folder)
    with pytest.raises(ConfigError) as info:
        parse_model_config_file(path, folder)
    return path, info.value


def problems_of(root: Path, text: str, folder: str = "m") -> tuple[Path, list[str]]:
    path = write_config(root, text, folder)
    _, problems = parse_model_config_file(path, folder)
    return path, [str(p) for p in problems]


# ------------------------------------------------------------------ syntax


def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path, error = parse_failure(
        tmp_path,
        """
        name: "m"
        platform: "onnxruntime_onnx"
        max_batch_size 8
        """,
    )
    assert str(error) == f"{path}:3:16: 'max_batch_size 8': Expected \":\"."
    assert (error.path, error.line, error.column) == (str(path), 3, 16)
    assert error.code is ErrorCode.INVALID_ARG


def test_unclosed_list_is_a_syntax_error_at_the_end(tmp_path: Path) -> None:
    path, error = parse_failure(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        input [
          { name: "a" data_type: TYPE_FP32 dims: [ 4 ] }
        """,
    )
    # protobuf reports the end of the file, wanting a ',' before the next element.
    assert str(error) == f"{path}:4:1: '': Expected \",\"."
    assert (error.line, error.column) == (4, 1)


def test_unknown_field_is_located(tmp_path: Path) -> None:
    path, error = parse_failure(
        tmp_path,
        """
        name: "m"
        platform: "onnxruntime_onnx"
        max_batch: 8
        """,
    )
    assert str(error) == (
        f'{path}:3:1: Message type "inference.ModelConfig" has no field named "max_batch".'
    )


def test_unknown_field_inside_an_input_is_located(tmp_path: Path) -> None:
    path, error = parse_failure(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        input [
          {
            name: "a"
            datatype: TYPE_FP32
          }
        ]
        """,
    )
    assert str(error) == (
        f'{path}:5:5: Message type "inference.ModelInput" has no field named "datatype".'
    )


def test_bad_enum_value_is_located_at_the_value(tmp_path: Path) -> None:
    path, error = parse_failure(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        input [
          {
            name: "a"
            data_type: TYPE_FLOAT32
            dims: [ 4 ]
          }
        ]
        """,
    )
    assert str(error) == (
        f"{path}:5:16: '    data_type: TYPE_FLOAT32': "
        'Enum type "inference.DataType" has no value named TYPE_FLOAT32.'
    )


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "m" / "config.pbtxt"
    with pytest.raises(ConfigError) as info:
        parse_model_config_file(path, "m")
    assert str(info.value) == f"{path}: no such file"


# ------------------------------------------------------------------ semantic rules


def test_name_not_matching_its_folder(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
          name: "densenet"
        """,
        folder="densenet_onnx",
    )
    assert problems == [
        f"{path}:2:3: model name 'densenet' does not match its folder 'densenet_onnx'"
    ]


def test_read_model_config_raises_the_first_problem(tmp_path: Path) -> None:
    write_config(tmp_path, 'name: "other"\nplatform: "onnxruntime_onnx"\n', folder="m")
    with pytest.raises(ConfigError) as info:
        read_model_config(tmp_path / "m")
    assert (info.value.line, info.value.column) == (1, 1)
    assert info.value.detail == "model name 'other' does not match its folder 'm'"


def test_empty_dims_point_at_the_dims_field(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        input [
          {
            name: "a"
            data_type: TYPE_FP32
            dims: [ ]
          }
        ]
        output [ { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
        """,
    )
    assert problems == [
        f"{path}:6:5: input 'a': dims must list at least one dimension "
        "(for a scalar use dims: [ 1 ] with reshape: { shape: [ ] })"
    ]


def test_missing_dims_point_at_the_tensor(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        output [
          { name: "b" data_type: TYPE_FP32 }
        ]
        """,
    )
    assert problems == [
        f"{path}:3:3: output 'b': dims must list at least one dimension "
        "(for a scalar use dims: [ 1 ] with reshape: { shape: [ ] })"
    ]


def test_zero_and_negative_dims_are_refused(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        input [
          {
            name: "a"
            data_type: TYPE_FP32
            dims: [ 3, 0, -2 ]
          }
        ]
        """,
    )
    assert problems == [
        f"{path}:7:5: input 'a': each dim must be >= 1 or -1 (variable), got [3, 0, -2]"
    ]


def test_nchw_input_needs_three_dims(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        input [
          { name: "image", data_type: TYPE_FP32, format: FORMAT_NCHW, dims: [ 1, 3, 224, 224 ] }
        ]
        """,
    )
    assert problems == [
        f"{path}:4:63: input 'image': FORMAT_NCHW needs 3 dims (without the batch dim), "
        "got [1, 3, 224, 224]"
    ]


def test_duplicate_input_points_at_the_second_declaration(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        input [
          { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
          { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }
        ]
        """,
    )
    assert problems == [f"{path}:4:5: input 'INPUT0' is declared twice"]


def test_reshape_with_another_element_count(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        input [
          {
            name: "a"
            data_type: TYPE_FP32
            dims: [ 6 ]
            reshape: { shape: [ 2, 2 ] }
          }
        ]
        """,
    )
    assert problems == [
        f"{path}:7:5: input 'a': reshape [2, 2] holds 4 elements but dims [6] hold 6"
    ]


def test_version_policy_latest_zero_points_at_num_versions(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        version_policy: { latest: { num_versions: 0 } }
        """,
    )
    assert problems == [f"{path}:2:29: version_policy latest: num_versions must be >= 1"]


def test_version_policy_empty_latest_points_at_latest(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        version_policy {
          latest { }
        }
        """,
    )
    assert problems == [f"{path}:3:3: version_policy latest: num_versions must be >= 1"]


def test_every_problem_is_returned_in_one_pass(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        max_batch_size: -1
        input [ { name: "a" data_type: TYPE_FP32 dims: [ 0 ] } ]
        """,
    )
    assert problems == [
        f"{path}:2:1: max_batch_size must be >= 0, got -1",
        f"{path}:3:42: input 'a': each dim must be >= 1 or -1 (variable), got [0]",
    ]


def test_comma_separated_fields_are_still_located(tmp_path: Path) -> None:
    # Text format allows ',' or ';' after any field; positions must survive them.
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        input [
          { name: "a", data_type: TYPE_FP32, dims: [ 4 ] },
          { name: "b"; data_type: TYPE_FP32; dims: [ 4 ] }
        ]
        output [
          { name: "a", data_type: TYPE_FP32, dims: [ 0 ] },
          { name: "a", data_type: TYPE_FP32, dims: [ 4 ] }
        ]
        """,
    )
    assert problems == [
        f"{path}:7:38: output 'a': each dim must be >= 1 or -1 (variable), got [0]",
        f"{path}:8:5: output 'a' is declared twice",
    ]


# ------------------------------------------------------------------ ensembles

ENSEMBLE_IO = """
name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [
  { name: "SCORES" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "LABELS" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""


def ensemble(steps: str) -> str:
    return ENSEMBLE_IO.lstrip("\n") + textwrap.dedent(steps).lstrip("\n")


def test_ensemble_step_reading_an_unknown_tensor(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        ensemble(
            """
            ensemble_scheduling {
              step [
                {
                  model_name: "preprocess"
                  model_version: -1
                  input_map { key: "raw" value: "IMAGE" }
                  output_map { key: "pixels" value: "PIXELS" }
                },
                {
                  model_name: "classifier"
                  model_version: -1
                  input_map { key: "x" value: "PIXEL" }
                  output_map { key: "y" value: "SCORES" }
                  output_map { key: "z" value: "LABELS" }
                }
              ]
            }
            """
        ),
        folder="pipeline",
    )
    assert problems == [
        f"{path}:20:7: ensemble step 'classifier' input 'x' reads 'PIXEL', which is neither "
        "an ensemble input nor any step's output"
    ]


def test_ensemble_cycle_names_the_steps(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        ensemble(
            """
            ensemble_scheduling {
              step [
                {
                  model_name: "detector"
                  input_map { key: "image" value: "IMAGE" }
                  input_map { key: "hint" value: "TRACKS" }
                  output_map { key: "boxes" value: "BOXES" }
                },
                {
                  model_name: "tracker"
                  input_map { key: "boxes" value: "BOXES" }
                  output_map { key: "tracks" value: "TRACKS" }
                  output_map { key: "scores" value: "SCORES" }
                  output_map { key: "labels" value: "LABELS" }
                }
              ]
            }
            """
        ),
        folder="pipeline",
    )
    assert problems == [
        f"{path}:9:1: ensemble steps form a cycle: 'detector' -> 'tracker' -> 'detector'"
    ]


def test_ensemble_output_no_step_writes(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        ensemble(
            """
            ensemble_scheduling {
              step [
                {
                  model_name: "classifier"
                  input_map { key: "x" value: "IMAGE" }
                  output_map { key: "y" value: "SCORES" }
                }
              ]
            }
            """
        ),
        folder="pipeline",
    )
    assert problems == [f"{path}:7:5: ensemble output 'LABELS' is not written by any step"]


def test_ensemble_tensor_written_twice(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        ensemble(
            """
            ensemble_scheduling {
              step [
                {
                  model_name: "a"
                  input_map { key: "x" value: "IMAGE" }
                  output_map { key: "y" value: "SCORES" }
                },
                {
                  model_name: "b"
                  input_map { key: "x" value: "IMAGE" }
                  output_map { key: "y" value: "SCORES" }
                  output_map { key: "z" value: "LABELS" }
                }
              ]
            }
            """
        ),
        folder="pipeline",
    )
    assert problems == [f"{path}:16:5: ensemble tensor 'SCORES' is written by both 'a' and 'b'"]


def test_ensemble_scheduling_needs_the_ensemble_platform(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        ensemble_scheduling { step [ { model_name: "a" } ] }
        """,
    )
    assert problems == [f'{path}:2:1: ensemble_scheduling needs platform: "ensemble"']


def test_an_ensemble_with_an_optimization_block_is_refused_as_triton_refuses_it(
    tmp_path: Path,
) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        name: "pipe"
        platform: "ensemble"
        optimization { priority: PRIORITY_MAX }
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
        ensemble_scheduling { step [ { model_name: "a" model_version: -1
            input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" } } ] }
        """,
        folder="pipe",
    )
    assert problems == [
        f"{path}:3:1: optimization should not be specified for ensemble 'pipe'; "
        "its steps' models can have it"
    ]


# ------------------------------------------------------------------ JSON form


def test_config_to_dict_is_triton_json(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        input [ { name: "IMAGE" data_type: TYPE_UINT8 format: FORMAT_NHWC dims: [ 224, 224, 3 ] } ]
        output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 1000 ] } ]
        dynamic_batching { max_queue_delay_microseconds: 100 }
        """,
    )
    config, problems = parse_model_config_file(path, "m")
    assert problems == []
    data = config_to_dict(config)

    assert data["input"] == [
        {
            "name": "IMAGE",
            "data_type": "TYPE_UINT8",
            "format": "FORMAT_NHWC",
            "dims": [224, 224, 3],
            "is_shape_tensor": False,
            "allow_ragged_batch": False,
            "optional": False,
            "is_non_linear_format_io": False,
        }
    ]
    assert data["output"][0]["dims"] == [1000]
    assert data["output"][0]["label_filename"] == ""
    assert data["max_batch_size"] == 8
    assert data["version_policy"] == {"latest": {"num_versions": 1}}
    assert data["instance_group"] == [
        {
            "name": "m_0",
            "count": 1,
            "kind": "KIND_AUTO",
            "gpus": [],
            "secondary_devices": [],
            "profile": [],
            "passive": False,
            "host_policy": "",
        }
    ]
    assert data["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert data["dynamic_batching"]["preferred_batch_size"] == []
    for field in (
        "name",
        "platform",
        "backend",
        "runtime",
        "default_model_filename",
        "batch_input",
        "batch_output",
        "cc_model_filenames",
        "metric_tags",
        "parameters",
        "model_warmup",
    ):
        assert field in data, field
    assert (data["platform"], data["backend"]) == ("onnxruntime_onnx", "onnxruntime")
    assert '"dims": [224, 224, 3]' in json.dumps(data)


def test_config_to_dict_turns_nested_int64_into_numbers(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        platform: "ensemble"
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
        version_policy: { specific: { versions: [ 1, 3 ] } }
        ensemble_scheduling {
          step [
            {
              model_name: "a"
              model_version: -1
              input_map { key: "x" value: "IN" }
              output_map { key: "y" value: "OUT" }
            }
          ]
        }
        """,
        folder="e",
    )
    config, problems = parse_model_config_file(path, "e")
    assert problems == []
    data = config_to_dict(config)
    assert data["version_policy"] == {"specific": {"versions": [1, 3]}}
    assert data["ensemble_scheduling"]["step"][0]["model_version"] == -1
    assert data["input"][0]["dims"] == [-1]
    assert data["instance_group"] == []


def test_config_to_dict_keeps_queue_policies_numeric(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        max_batch_size: 4
        dynamic_batching {
          priority_levels: 2
          default_priority_level: 1
          priority_queue_policy {
            key: 1
            value: { default_timeout_microseconds: 250 max_queue_size: 8 }
          }
        }
        """,
    )
    config, problems = parse_model_config_file(path, "m")
    assert problems == []
    policy = config_to_dict(config)["dynamic_batching"]["priority_queue_policy"]
    assert policy == {
        "1": {
            "default_timeout_microseconds": 250,
            "max_queue_size": 8,
            "timeout_action": "REJECT",
            "allow_timeout_override": False,
        }
    }


# ------------------------------------------------------------------ platform inference


def test_platform_is_inferred_from_the_highest_version_folder(tmp_path: Path) -> None:
    path = write_config(tmp_path, "max_batch_size: 8\n")
    for name, model_file in (("1", "model.py"), ("2", "model.onnx"), ("\u00b2", "model.plan")):
        (path.parent / name).mkdir()
        (path.parent / name / model_file).write_bytes(b"")
    config, problems = parse_model_config_file(path, "m")
    assert problems == []
    assert (config.platform, config.backend) == ("onnxruntime_onnx", "onnxruntime")
    assert config.default_model_filename == "model.onnx"


def test_no_platform_and_no_model_file(tmp_path: Path) -> None:
    path, problems = problems_of(tmp_path, "max_batch_size: 8\n")
    assert problems == [
        f"{path}: neither 'platform' nor 'backend' is set, and no model.onnx, model.plan "
        "or model.py was found in a version folder to infer it"
    ]


# ------------------------------------------------------------------ paths and passthrough settings
# Every file a config names stays inside the model folder, and settings handed
# to ONNX Runtime under their own names pass an allow-list: the same rules for
# config.pbtxt and for a load request's config (config_from_json).


def test_label_filename_outside_the_model_folder_is_located(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        backend: "python"
        output [
          { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "/etc/passwd" },
          { name: "Z" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "../../../etc/passwd" }
        ]
        """,
    )
    assert problems == [
        f"{path}:3:48: output 'Y': label_filename '/etc/passwd' is outside the model folder",
        f"{path}:4:48: output 'Z': label_filename '../../../etc/passwd' is outside the model folder",
    ]


def test_default_model_filename_outside_the_model_folder(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        backend: "python"
        default_model_filename: "/tmp/evil/model.py"
        """,
    )
    assert problems == [
        f"{path}:2:1: default_model_filename '/tmp/evil/model.py' is outside the model folder"
    ]


def test_default_model_filename_may_name_a_file_beside_the_versions(tmp_path: Path) -> None:
    _, problems = problems_of(
        tmp_path, 'backend: "python"\ndefault_model_filename: "../shared/model.py"\n'
    )
    assert problems == []


def test_warmup_file_outside_the_warmup_folder(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        backend: "python"
        max_batch_size: 1
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
        model_warmup [
          { name: "shadow" batch_size: 1
            inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "/etc/shadow" } } },
          { name: "zero" batch_size: 1
            inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "/dev/zero" } } },
          { name: "config" batch_size: 1
            inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "../config.pbtxt" } } }
        ]
        """,
    )
    assert problems == [
        f"{path}:5:3: model_warmup 'shadow', input 'X': input_data_file '/etc/shadow' is outside "
        "the model's warmup folder",
        f"{path}:7:3: model_warmup 'zero', input 'X': input_data_file '/dev/zero' is outside "
        "the model's warmup folder",
        f"{path}:9:3: model_warmup 'config', input 'X': input_data_file '../config.pbtxt' is "
        "outside the model's warmup folder",
    ]


def test_ensemble_step_model_name_must_be_a_folder_name(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        ensemble(
            """
            ensemble_scheduling {
              step [
                {
                  model_name: ".."
                  input_map { key: "image" value: "IMAGE" }
                  output_map { key: "scores" value: "SCORES" }
                  output_map { key: "labels" value: "LABELS" }
                }
              ]
            }
            """
        ),
        folder="pipeline",
    )
    assert problems == [
        f"{path}:12:7: ensemble step #0: model name '..': expected a single folder name "
        "(not '.' or '..', without '/' or NUL)"
    ]


def test_tensorrt_plugin_libraries_stay_in_the_model_folder(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "tensorrt_plan"
        model_operations { op_library_filename: "/opt/plugins/libyolo.so" }
        parameters { key: "plugins" value { string_value: "lib/ok.so, ../../libevil.so" } }
        """,
    )
    assert problems == [
        f"{path}:2:20: model_operations.op_library_filename '/opt/plugins/libyolo.so' is outside "
        "the model folder",
        f"{path}:3:1: parameters 'plugins' entry '../../libevil.so' is outside the model folder",
    ]


def test_onnxruntime_session_entry_that_writes_a_file_is_refused(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        parameters { key: "session.collect_node_memory_stats_to_file" value { string_value: "/etc/hosts" } }
        """,
    )
    assert problems == [
        f"{path}:2:1: parameter 'session.collect_node_memory_stats_to_file' makes ONNX Runtime "
        "read or write files, which a model config may not ask for"
    ]


def test_unknown_onnxruntime_session_entry_is_refused_with_the_allowed_ones(tmp_path: Path) -> None:
    _, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        parameters { key: "session.intra_op.allow_spinning" value { string_value: "1" } }
        parameters { key: "session.brand_new_option" value { string_value: "1" } }
        """,
    )
    assert len(problems) == 1
    assert (
        ": parameter 'session.brand_new_option' is not an ONNX Runtime session entry edgebox "
        in problems[0]
    )
    assert "(allowed: session.allow_released_opsets_only, " in problems[0]


def test_session_parameters_of_other_backends_are_theirs(tmp_path: Path) -> None:
    _, problems = problems_of(
        tmp_path,
        """
        backend: "python"
        parameters { key: "session.anything" value { string_value: "/tmp/x" } }
        """,
    )
    assert problems == []


def test_tensorrt_accelerator_options_are_an_allow_list(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        optimization { execution_accelerators { gpu_execution_accelerator : [ {
          name : "tensorrt"
          parameters { key: "precision_mode" value: "FP16" }
          parameters { key: "trt_engine_cache_enable" value: "1" }
          parameters { key: "trt_engine_cache_path" value: "/var/cache/trt" }
          parameters { key: "trt_dump_subgraphs" value: "1" }
        } ] } }
        """,
    )
    where = f"{path}:2:71: execution accelerator 'tensorrt': "
    assert len(problems) == 2
    assert problems[0].startswith(
        f"{where}accelerator parameter 'trt_dump_subgraphs' is not a TensorRT execution provider "
        "option edgebox passes on (allowed: max_workspace_size_bytes, precision_mode, "
    )
    assert problems[1] == (
        f"{where}accelerator parameter 'trt_engine_cache_path' '/var/cache/trt' is outside "
        "the model folder"
    )


def test_tensorrt_engine_cache_needs_a_folder_in_the_model(tmp_path: Path) -> None:
    _, problems = problems_of(
        tmp_path,
        """
        platform: "onnxruntime_onnx"
        optimization { execution_accelerators { gpu_execution_accelerator : [ {
          name : "tensorrt"
          parameters { key: "trt_engine_cache_enable" value: "true" }
        } ] } }
        """,
    )
    assert [p.split(": ", 2)[2] for p in problems] == [
        "accelerator parameter 'trt_engine_cache_enable' needs 'trt_engine_cache_path', a folder "
        "inside the model folder (the default would be the daemon's working directory)"
    ]


def test_load_request_config_is_held_to_the_same_rules(tmp_path: Path) -> None:
    config = {
        "backend": "python",
        "output": [
            {"name": "Y", "data_type": "TYPE_FP32", "dims": [2], "label_filename": "/etc/passwd"}
        ],
    }
    with pytest.raises(ConfigError) as info:
        config_from_json(json.dumps(config), "m", tmp_path / "m")
    assert str(info.value) == (
        "load request config for 'm': output 'Y': label_filename '/etc/passwd' is outside the "
        "model folder"
    )
    assert info.value.code is ErrorCode.INVALID_ARG


def test_response_cache_on_a_decoupled_model_is_refused_with_tritons_words(
    tmp_path: Path,
) -> None:
    path, problems = problems_of(
        tmp_path,
        """
        name: "m"
        backend: "python"
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
        model_transaction_policy { decoupled: true }
        response_cache { enable: true }
        """,
    )
    assert problems == [
        f"{path}:6:1: Response Cache does not currently support model 'm' with 'decoupled' "
        "transaction policy. Please disable the response cache."
    ]
