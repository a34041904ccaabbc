"""ONNX sequence models equivalent to Triton's sequence examples, each written
as ``<folder>/config.pbtxt`` + ``<folder>/1/model.onnx``.

- ``simple_sequence``: what Triton's ``simple_*_sequence_*_client.py`` examples
  expect: OUTPUT = INPUT + START (the first request answers input + 1, the
  others their input), direct strategy.
- ``simple_dyna_sequence``: also END and CORRID controls, OUTPUT = INPUT +
  START + END * CORRID (the last request adds the correlation id, as the
  examples' ``--dyna`` mode expects), oldest strategy.
- an implicit-state accumulator, like the "wo_initial_state" models of Triton's
  qa ``gen_qa_implicit_models.py``: OUTPUT_STATE = INPUT on START, else INPUT +
  INPUT_STATE; null (READY 0) slots keep their state; OUTPUT = OUTPUT_STATE.

Every output is multiplied or selected by READY so that the null requests the
direct strategy pads a batch with stay inert. The configs are written by hand,
as a user would write them.

    python -m scripts.sequence_onnx /path/to/repository
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from scripts.onnx_builders import IR_VERSION, OPSET

_CONTROL = """\
    {{
      name: "{name}"
      control [ {{ kind: {kind} {values} }} ]
    }}"""
_INT32_FLAG = "int32_false_true: [ 0, 1 ]"

_IO = """\
input [
  {
    name: "INPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
output [
  {
    name: "OUTPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
instance_group [ { kind: KIND_CPU } ]
"""


def _controls(*entries: tuple[str, str, str]) -> str:
    return ",\n".join(
        _CONTROL.format(name=name, kind=kind, values=values) for name, kind, values in entries
    )


def _batched(name: str, elem_type: int = TensorProto.INT32):
    return helper.make_tensor_value_info(name, elem_type, ["batch", 1])


def _write(folder: Path, config: str, graph) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    (folder / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    (folder / "config.pbtxt").write_text(config)
    return folder


def build_simple_sequence(folder: Path) -> Path:
    """INPUT, START, READY INT32 [batch, 1] -> OUTPUT = (INPUT + START) * READY."""
    name = folder.name
    config = (
        f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        "sequence_batching {\n"
        "  max_sequence_idle_microseconds: 5000000\n"
        "  direct { }\n"
        "  control_input [\n"
        + _controls(
            ("START", "CONTROL_SEQUENCE_START", _INT32_FLAG),
            ("READY", "CONTROL_SEQUENCE_READY", _INT32_FLAG),
        )
        + "\n  ]\n}\n"
        + _IO
    )
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT", "START"], ["sum"]),
            helper.make_node("Mul", ["sum", "READY"], ["OUTPUT"]),
        ],
        "simple_sequence",
        [_batched("INPUT"), _batched("START"), _batched("READY")],
        [_batched("OUTPUT")],
    )
    return _write(folder, config, graph)


def build_simple_dyna_sequence(folder: Path) -> Path:
    """INPUT, START, END, READY INT32 and CORRID UINT64 [batch, 1] ->
    OUTPUT = (INPUT + START + END * int32(CORRID)) * READY."""
    name = folder.name
    config = (
        f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        "sequence_batching {\n"
        "  max_sequence_idle_microseconds: 5000000\n"
        "  oldest {\n"
        "    max_candidate_sequences: 4\n"
        "  }\n"
        "  control_input [\n"
        + _controls(
            ("START", "CONTROL_SEQUENCE_START", _INT32_FLAG),
            ("END", "CONTROL_SEQUENCE_END", _INT32_FLAG),
            ("READY", "CONTROL_SEQUENCE_READY", _INT32_FLAG),
            ("CORRID", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_UINT64"),
        )
        + "\n  ]\n}\n"
        + _IO
    )
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["CORRID"], ["corrid32"], to=TensorProto.INT32),
            helper.make_node("Mul", ["END", "corrid32"], ["last"]),
            helper.make_node("Add", ["INPUT", "START"], ["started"]),
            helper.make_node("Add", ["started", "last"], ["sum"]),
            helper.make_node("Mul", ["sum", "READY"], ["OUTPUT"]),
        ],
        "simple_dyna_sequence",
        [
            _batched("INPUT"),
            _batched("START"),
            _batched("END"),
            _batched("READY"),
            _batched("CORRID", TensorProto.UINT64),
        ],
        [_batched("OUTPUT")],
    )
    return _write(folder, config, graph)


def build_implicit_accumulator(folder: Path) -> Path:
    """INPUT, START, READY, INPUT_STATE INT32 [batch, 1] -> OUTPUT_STATE =
    READY ? (START ? INPUT : INPUT + INPUT_STATE) : INPUT_STATE, OUTPUT = OUTPUT_STATE."""
    name = folder.name
    config = (
        f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        "sequence_batching {\n"
        "  direct { }\n"
        "  control_input [\n"
        + _controls(
            ("START", "CONTROL_SEQUENCE_START", _INT32_FLAG),
            ("READY", "CONTROL_SEQUENCE_READY", _INT32_FLAG),
        )
        + "\n  ]\n"
        "  state [\n"
        "    {\n"
        '      input_name: "INPUT_STATE"\n'
        '      output_name: "OUTPUT_STATE"\n'
        "      data_type: TYPE_INT32\n"
        "      dims: [ 1 ]\n"
        "    }\n"
        "  ]\n}\n" + _IO
    )
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["START"], ["is_start"], to=TensorProto.BOOL),
            helper.make_node("Cast", ["READY"], ["is_ready"], to=TensorProto.BOOL),
            helper.make_node("Add", ["INPUT", "INPUT_STATE"], ["accumulated"]),
            helper.make_node("Where", ["is_start", "INPUT", "accumulated"], ["next_state"]),
            helper.make_node("Where", ["is_ready", "next_state", "INPUT_STATE"], ["OUTPUT_STATE"]),
            helper.make_node("Identity", ["OUTPUT_STATE"], ["OUTPUT"]),
        ],
        "implicit_accumulator",
        [_batched("INPUT"), _batched("START"), _batched("READY"), _batched("INPUT_STATE")],
        [_batched("OUTPUT"), _batched("OUTPUT_STATE")],
    )
    return _write(folder, config, graph)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m scripts.sequence_onnx REPOSITORY", file=sys.stderr)
        return 2
    root = Path(argv[0])
    build_simple_sequence(root / "simple_sequence")
    build_simple_dyna_sequence(root / "simple_dyna_sequence")
    build_implicit_accumulator(root / "sequence_implicit_accumulator")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
