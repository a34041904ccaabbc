"""Triton's auto-complete for TensorRT engines, and the check of a written
config against the engine. The engine's I/O is given as plain ``EngineIO``,
as the backend reads it, so no fake is needed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2

from edgebox.backends.base import ModelContext
from edgebox.backends.tensorrt.autocomplete import complete_and_check
from edgebox.backends.tensorrt.engine_io import EngineIO, EngineTensor
from edgebox.backends.tensorrt.profiles import Profile, ShapeRange
from edgebox.errors import Unavailable
from edgebox.repository.config import read_model_config


def lane_io(max_batch: int = 8, profiles: int = 1) -> EngineIO:
    """The lane model: input [-1,3,360,640] FP32 -> predict_lanes [-1,2784,77]."""
    image = EngineTensor("input", True, "TYPE_FP32", "FLOAT", (-1, 3, 360, 640))
    lanes = EngineTensor("predict_lanes", False, "TYPE_FP32", "FLOAT", (-1, 2784, 77))
    ranges = [
        Profile(
            i,
            {
                "input": ShapeRange(
                    (1, 3, 360, 640), (1, 3, 360, 640), (max_batch * (i + 1), 3, 360, 640)
                )
            },
        )
        for i in range(profiles)
    ]
    return EngineIO((image,), (lanes,), tuple(ranges))


def context_for(tmp_path: Path, config_text: str) -> ModelContext:
    model_dir = tmp_path / "lane"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(config_text))
    config = read_model_config(model_dir)
    return ModelContext("lane", 1, config, model_dir, model_dir / "1")


def mismatch(context: ModelContext, text: str) -> str:
    plan = context.version_dir / "model.plan"
    return f"{context.where}: {context.model_dir / 'config.pbtxt'} does not match {plan}: {text}"


def failure(context: ModelContext, io: EngineIO) -> str:
    with pytest.raises(Unavailable) as error:
        complete_and_check(context, io, context.version_dir / "model.plan")
    return str(error.value)


def test_empty_config_is_filled_from_the_engine(tmp_path: Path) -> None:
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\n')
    complete_and_check(context, lane_io(max_batch=8), context.version_dir / "model.plan")
    config = context.config
    assert config.max_batch_size == 8
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("input", model_config_pb2.TYPE_FP32, [3, 360, 640])
    ]
    assert [(t.name, t.data_type, list(t.dims)) for t in config.output] == [
        ("predict_lanes", model_config_pb2.TYPE_FP32, [2784, 77])
    ]


def test_batching_model_without_a_scheduler_gets_dynamic_batching(tmp_path: Path) -> None:
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\n')
    complete_and_check(context, lane_io(max_batch=8), context.version_dir / "model.plan")
    assert context.config.HasField("dynamic_batching")


def test_batch_of_one_gets_no_dynamic_batching(tmp_path: Path) -> None:
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\n')
    complete_and_check(context, lane_io(max_batch=1), context.version_dir / "model.plan")
    assert context.config.max_batch_size == 1
    assert not context.config.HasField("dynamic_batching")


def test_a_configured_sequence_batcher_is_left_alone(tmp_path: Path) -> None:
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\nsequence_batching { }\n')
    complete_and_check(context, lane_io(max_batch=8), context.version_dir / "model.plan")
    assert not context.config.HasField("dynamic_batching")


def test_max_batch_size_counts_only_the_profiles_the_instances_may_use(tmp_path: Path) -> None:
    context = context_for(
        tmp_path,
        'platform: "tensorrt_plan"\ninstance_group [ { kind: KIND_GPU profile: [ "1" ] } ]\n',
    )
    complete_and_check(
        context, lane_io(max_batch=4, profiles=2), context.version_dir / "model.plan"
    )
    assert context.config.max_batch_size == 8


def test_engine_without_a_batch_dimension_is_not_batched(tmp_path: Path) -> None:
    io = EngineIO(
        (EngineTensor("x", True, "TYPE_FP32", "FLOAT", (16,)),),
        (EngineTensor("y", False, "TYPE_FP32", "FLOAT", (16,)),),
        (Profile(0, {"x": ShapeRange((16,), (16,), (16,))}),),
    )
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\n')
    complete_and_check(context, io, context.version_dir / "model.plan")
    assert context.config.max_batch_size == 0
    assert list(context.config.input[0].dims) == [16]


def test_scalar_tensor_gets_dims_one_and_an_empty_reshape(tmp_path: Path) -> None:
    io = EngineIO(
        (EngineTensor("x", True, "TYPE_INT32", "INT32", ()),),
        (EngineTensor("y", False, "TYPE_INT32", "INT32", ()),),
        (Profile(0, {"x": ShapeRange((), (), ())}),),
    )
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\n')
    complete_and_check(context, io, context.version_dir / "model.plan")
    assert list(context.config.input[0].dims) == [1]
    assert context.config.input[0].HasField("reshape")


def test_fp16_and_int8_io_keep_their_types(tmp_path: Path) -> None:
    io = EngineIO(
        (EngineTensor("x", True, "TYPE_INT8", "INT8", (-1, 8)),),
        (EngineTensor("y", False, "TYPE_FP16", "HALF", (-1, 8)),),
        (Profile(0, {"x": ShapeRange((1, 8), (1, 8), (2, 8))}),),
    )
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\n')
    complete_and_check(context, io, context.version_dir / "model.plan")
    assert context.config.input[0].data_type == model_config_pb2.TYPE_INT8
    assert context.config.output[0].data_type == model_config_pb2.TYPE_FP16


def test_seed_lane_config_matches_the_lane_engine(tmp_path: Path) -> None:
    seed = Path(__file__).parents[2] / "repository/fixtures/seeds/laneDetect_model/config.pbtxt"
    context = context_for(tmp_path, seed.read_text().replace('name: "laneDetect_model"', ""))
    complete_and_check(context, lane_io(max_batch=1), context.version_dir / "model.plan")
    assert context.config.max_batch_size == 1


def test_dims_one_shorter_than_the_engine_turn_batching_on(tmp_path: Path) -> None:
    context = context_for(
        tmp_path,
        """
        platform: "tensorrt_plan"
        input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 360, 640 ] } ]
        output [ { name: "predict_lanes" data_type: TYPE_FP32 dims: [ 2784, 77 ] } ]
        """,
    )
    complete_and_check(context, lane_io(max_batch=4), context.version_dir / "model.plan")
    assert context.config.max_batch_size == 4


def test_max_batch_size_beyond_the_profiles_is_a_mismatch(tmp_path: Path) -> None:
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\nmax_batch_size: 16\n')
    assert failure(context, lane_io(max_batch=8)) == mismatch(
        context, "max_batch_size 16, but the engine's profile(s) 0 take a batch of at most 8"
    )


def test_wrong_datatype_is_a_mismatch_naming_both(tmp_path: Path) -> None:
    context = context_for(
        tmp_path,
        """
        platform: "tensorrt_plan"
        max_batch_size: 1
        input [ { name: "input" data_type: TYPE_FP16 dims: [ 3, 360, 640 ] } ]
        """,
    )
    assert failure(context, lane_io()) == mismatch(
        context, "input 'input': config says TYPE_FP16, engine has TYPE_FP32"
    )


def test_unknown_tensor_is_a_mismatch_listing_the_engines(tmp_path: Path) -> None:
    context = context_for(
        tmp_path,
        """
        platform: "tensorrt_plan"
        max_batch_size: 1
        input [ { name: "images" data_type: TYPE_FP32 dims: [ 3, 360, 640 ] } ]
        """,
    )
    assert failure(context, lane_io()) == mismatch(
        context, "input 'images' is not in the engine (its inputs: 'input')"
    )


def test_wrong_dims_are_a_mismatch(tmp_path: Path) -> None:
    context = context_for(
        tmp_path,
        """
        platform: "tensorrt_plan"
        max_batch_size: 1
        output [ { name: "predict_lanes" data_type: TYPE_FP32 dims: [ 2784, 76 ] } ]
        """,
    )
    assert failure(context, lane_io()) == mismatch(
        context,
        "output 'predict_lanes': config shape [-1, 2784, 76] (max_batch_size 1) vs engine "
        "shape [-1, 2784, 77]",
    )


def test_config_dims_outside_every_profile_are_a_mismatch(tmp_path: Path) -> None:
    io = EngineIO(
        (EngineTensor("x", True, "TYPE_FP32", "FLOAT", (-1, 3, -1, -1)),),
        (EngineTensor("y", False, "TYPE_FP32", "FLOAT", (-1, 10)),),
        (Profile(0, {"x": ShapeRange((1, 3, 224, 224), (1, 3, 320, 320), (4, 3, 640, 640))}),),
    )
    context = context_for(
        tmp_path,
        """
        platform: "tensorrt_plan"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, 720, 1280 ] } ]
        """,
    )
    assert failure(context, io) == mismatch(
        context,
        "input 'x': config dims [3, 720, 1280] are outside every allowed optimization profile "
        "(profile 0: [1,3,224,224]..[4,3,640,640])",
    )


def test_batching_config_on_a_fixed_batch_engine_is_a_mismatch(tmp_path: Path) -> None:
    io = EngineIO(
        (EngineTensor("x", True, "TYPE_FP32", "FLOAT", (4, 16)),),
        (EngineTensor("y", False, "TYPE_FP32", "FLOAT", (4, 16)),),
        (Profile(0, {"x": ShapeRange((4, 16), (4, 16), (4, 16))}),),
    )
    context = context_for(tmp_path, 'platform: "tensorrt_plan"\nmax_batch_size: 2\n')
    assert failure(context, io) == mismatch(
        context,
        "input 'x': max_batch_size 2 needs a variable first dimension, but the engine's shape is [4, 16]",
    )


def test_undeclared_engine_input_is_a_mismatch(tmp_path: Path) -> None:
    io = EngineIO(
        (
            EngineTensor("a", True, "TYPE_FP32", "FLOAT", (-1, 4)),
            EngineTensor("b", True, "TYPE_FP32", "FLOAT", (-1, 4)),
        ),
        (EngineTensor("y", False, "TYPE_FP32", "FLOAT", (-1, 4)),),
        (Profile(0, {n: ShapeRange((1, 4), (1, 4), (2, 4)) for n in "ab"}),),
    )
    context = context_for(
        tmp_path,
        """
        platform: "tensorrt_plan"
        max_batch_size: 2
        input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] } ]
        """,
    )
    assert failure(context, io) == mismatch(
        context, "the engine needs input(s) 'b', which the config does not declare"
    )


def test_instance_group_naming_a_missing_profile_is_a_mismatch(tmp_path: Path) -> None:
    context = context_for(
        tmp_path,
        'platform: "tensorrt_plan"\ninstance_group [ { name: "big" kind: KIND_GPU profile: [ "2" ] } ]\n',
    )
    assert failure(context, lane_io(profiles=2)) == mismatch(
        context,
        "instance_group 'big': instance_group profile '2' is not a profile of the engine, which "
        'has 2 (use "0" to "1")',
    )


# ------------------------------------------------------------------ sequence batching

SEQUENCE_CONFIG = """
    platform: "tensorrt_plan"
    max_batch_size: 8
    sequence_batching {
      direct { }
      control_input [
        { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
        { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
      ]
      state [
        {
          input_name: "INPUT_STATE"
          output_name: "OUTPUT_STATE"
          data_type: TYPE_INT32
          dims: [ 1 ]
        }
      ]
    }
    """


def sequence_io(start_type: str = "TYPE_INT32", with_ready: bool = True) -> EngineIO:
    """The implicit-state accumulator as an engine: INPUT, START, READY,
    INPUT_STATE [-1, 1] INT32 -> OUTPUT, OUTPUT_STATE [-1, 1] INT32."""
    names = ["INPUT", "START", "INPUT_STATE"] + (["READY"] if with_ready else [])
    inputs = tuple(
        EngineTensor(n, True, start_type if n == "START" else "TYPE_INT32", "INT32", (-1, 1))
        for n in names
    )
    outputs = tuple(
        EngineTensor(n, False, "TYPE_INT32", "INT32", (-1, 1)) for n in ("OUTPUT", "OUTPUT_STATE")
    )
    ranges = {n: ShapeRange((1, 1), (1, 1), (8, 1)) for n in names}
    return EngineIO(inputs, outputs, (Profile(0, ranges),))


def test_sequence_controls_and_states_are_engine_inputs_the_config_need_not_declare(
    tmp_path: Path,
) -> None:
    context = context_for(
        tmp_path,
        SEQUENCE_CONFIG
        + """
        input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
        """,
    )
    complete_and_check(context, sequence_io(), context.version_dir / "model.plan")
    assert [t.name for t in context.config.input] == ["INPUT"]


def test_autocomplete_leaves_sequence_tensors_out_of_the_config(tmp_path: Path) -> None:
    context = context_for(tmp_path, SEQUENCE_CONFIG)
    complete_and_check(context, sequence_io(), context.version_dir / "model.plan")
    assert [t.name for t in context.config.input] == ["INPUT"]
    assert [t.name for t in context.config.output] == ["OUTPUT"]


def test_a_control_whose_engine_type_differs_is_refused(tmp_path: Path) -> None:
    context = context_for(tmp_path, SEQUENCE_CONFIG)
    assert failure(context, sequence_io(start_type="TYPE_FP32")) == mismatch(
        context, "sequence control 'START': config says TYPE_INT32, engine has TYPE_FP32"
    )


def test_a_control_the_engine_lacks_is_refused(tmp_path: Path) -> None:
    context = context_for(tmp_path, SEQUENCE_CONFIG)
    assert failure(context, sequence_io(with_ready=False)) == mismatch(
        context,
        "sequence control 'READY' is not in the engine "
        "(its inputs: 'INPUT', 'START', 'INPUT_STATE')",
    )
