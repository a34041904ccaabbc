"""gRPC decode_request / encode_response, in process: raw and typed contents,
every datatype family (FP16, BYTES included), exact error texts, and the
no-copy promise of raw inputs."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.protocol.grpc.infer_codec import CONTENTS_FIELD, decode_request, encode_response
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.tensors import DATATYPES, InferRequest, InferResponse, RequestedOutput, Tensor


def request(*inputs: pb.ModelInferRequest.InferInputTensor, raw=(), **fields):
    message = pb.ModelInferRequest(model_name="m", **fields)
    message.inputs.extend(inputs)
    message.raw_input_contents.extend(raw)
    return message


def tensor(name: str, datatype: str, shape: list[int], **contents):
    item = pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=shape)
    if contents:
        item.contents.CopyFrom(pb.InferTensorContents(**contents))
    return item


def decode_error(message) -> EdgeboxError:
    with pytest.raises(EdgeboxError) as caught:
        decode_request(message)
    return caught.value


def bytes_wire(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


# -- raw_input_contents -------------------------------------------------------------


def test_raw_fp32_input_is_a_read_only_view_over_the_message_bytes():
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    decoded = decode_request(request(tensor("X", "FP32", [2, 3]), raw=[data.tobytes()]))
    array = decoded.inputs[0].data
    np.testing.assert_array_equal(array, data)
    assert array.dtype == np.float32
    assert not array.flags.owndata
    assert not array.flags.writeable


def test_raw_fp16_input_keeps_its_datatype():
    data = np.array([0.5, -2.25, 65504.0], dtype=np.float16)
    decoded = decode_request(request(tensor("H", "FP16", [3]), raw=[data.tobytes()]))
    assert decoded.inputs[0].datatype == "FP16"
    assert decoded.inputs[0].data.dtype == np.float16
    np.testing.assert_array_equal(decoded.inputs[0].data, data)


def test_raw_bytes_input_holds_each_element():
    decoded = decode_request(
        request(tensor("S", "BYTES", [1, 3]), raw=[bytes_wire(b"a", b"", b"\xff\x00")])
    )
    assert decoded.inputs[0].data.tolist() == [[b"a", b"", b"\xff\x00"]]


def test_raw_entries_follow_the_order_of_inputs():
    a = np.array([1, 2], dtype=np.int32)
    b = np.array([3, 4, 5], dtype=np.int64)
    decoded = decode_request(
        request(
            tensor("A", "INT32", [2]), tensor("B", "INT64", [3]), raw=[a.tobytes(), b.tobytes()]
        )
    )
    assert [t.data.tolist() for t in decoded.inputs] == [[1, 2], [3, 4, 5]]


def test_raw_size_that_does_not_fit_the_shape_names_the_entry():
    error = decode_error(request(tensor("X", "FP32", [1, 16]), raw=[b"\0" * 60]))
    assert error.code is ErrorCode.INVALID_ARG
    assert str(error) == (
        "model 'm', input 'X': the size of raw_input_contents[0] is 60 but shape [1, 16] of "
        "FP32 needs 64 bytes"
    )


def test_fewer_raw_entries_than_inputs_names_the_input_without_data():
    error = decode_error(
        request(tensor("A", "FP32", [1]), tensor("B", "FP32", [1]), raw=[b"\0" * 4])
    )
    assert str(error) == (
        "model 'm', input 'B': no raw_input_contents entry for it (the request has 1 for 2 inputs)"
    )


def test_more_raw_entries_than_inputs_is_refused():
    error = decode_error(request(tensor("A", "FP32", [1]), raw=[b"\0" * 4, b"\0" * 4]))
    assert str(error) == (
        "model 'm': the request has 2 raw_input_contents for 1 inputs (one entry per input, "
        "in the order of 'inputs')"
    )


def test_contents_beside_raw_input_contents_is_refused_as_triton_does():
    error = decode_error(request(tensor("A", "FP32", [1], fp32_contents=[1.0]), raw=[b"\0" * 4]))
    assert str(error) == (
        "model 'm', input 'A': 'contents' must be empty when the request uses raw_input_contents"
    )


def test_malformed_raw_bytes_element_is_refused():
    error = decode_error(request(tensor("S", "BYTES", [2]), raw=[bytes_wire(b"abc")[:-1]]))
    assert error.code is ErrorCode.INVALID_ARG
    assert str(error).startswith("model 'm', input 'S': ")


# -- typed contents -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("datatype", "field", "values"),
    [
        ("BOOL", "bool_contents", [True, False, True]),
        ("INT8", "int_contents", [-128, 0, 127]),
        ("INT16", "int_contents", [-32768, 1, 32767]),
        ("INT32", "int_contents", [-(2**31), 0, 2**31 - 1]),
        ("INT64", "int64_contents", [-(2**63), 0, 2**63 - 1]),
        ("UINT8", "uint_contents", [0, 1, 255]),
        ("UINT16", "uint_contents", [0, 1, 65535]),
        ("UINT32", "uint_contents", [0, 1, 2**32 - 1]),
        ("UINT64", "uint64_contents", [0, 1, 2**64 - 1]),
        ("FP32", "fp32_contents", [0.5, -1.25, 3.0]),
        ("FP64", "fp64_contents", [0.1, -1e300, 3.0]),
        ("BYTES", "bytes_contents", [b"x", b"", b"\x00\xff"]),
    ],
)
def test_typed_contents_of_every_datatype_that_has_a_field(datatype, field, values):
    decoded = decode_request(request(tensor("T", datatype, [1, 3], **{field: values})))
    array = decoded.inputs[0].data
    assert array.shape == (1, 3)
    assert array.ravel().tolist() == values
    if datatype != "BYTES":
        assert str(array.dtype) == {"BOOL": "bool"}.get(
            datatype, datatype.lower().replace("fp", "float")
        )


def test_every_datatype_but_fp16_and_bf16_has_a_contents_field():
    assert set(DATATYPES) - set(CONTENTS_FIELD) == {"FP16", "BF16"}


def test_fp16_in_typed_contents_is_refused_with_the_way_to_send_it():
    error = decode_error(request(tensor("H", "FP16", [2], fp32_contents=[1.0, 2.0])))
    assert str(error) == (
        "model 'm', input 'H': 'contents' holds 'fp32_contents' but datatype FP16 must be sent "
        "in raw_input_contents"
    )


def test_contents_in_the_wrong_field_names_the_right_one():
    error = decode_error(request(tensor("A", "FP32", [1], int_contents=[1])))
    assert str(error) == (
        "model 'm', input 'A': 'contents' holds 'int_contents' but datatype FP32 is carried in "
        "'fp32_contents'"
    )


def test_contents_with_the_wrong_count_says_expected_and_got():
    error = decode_error(request(tensor("A", "FP32", [1, 16], fp32_contents=[1.0] * 15)))
    assert str(error) == (
        "model 'm', input 'A': 'fp32_contents' holds 15 elements, shape [1, 16] needs 16"
    )


def test_narrow_integer_out_of_range_is_refused_not_wrapped():
    error = decode_error(request(tensor("A", "INT8", [2], int_contents=[1, 200])))
    assert str(error) == (
        "model 'm', input 'A': 'int_contents' value 200 is out of range for INT8 (-128..127)"
    )


def test_input_without_any_data_is_refused():
    error = decode_error(request(tensor("A", "FP32", [2])))
    assert str(error) == (
        "model 'm', input 'A': no data; send it in raw_input_contents or 'contents'"
    )


def test_empty_tensor_needs_no_data():
    decoded = decode_request(request(tensor("A", "FP16", [0, 4])))
    assert decoded.inputs[0].data.shape == (0, 4)


# -- shapes, names, parameters ----------------------------------------------------------


def test_unknown_datatype_is_refused_as_over_http():
    error = decode_error(request(tensor("A", "FLOAT", [1]), raw=[b"\0" * 4]))
    assert str(error) == "model 'm', input 'A': unknown datatype 'FLOAT'"


def test_negative_dimension_is_refused_by_the_shared_shape_check():
    error = decode_error(request(tensor("A", "FP32", [-1, 2]), raw=[b""]))
    assert str(error) == (
        "model 'm', input 'A': 'shape' must be a list of non-negative integers, got [-1, 2]"
    )


def test_input_without_a_name_is_refused():
    error = decode_error(request(tensor("", "FP32", [1]), raw=[b"\0" * 4]))
    assert str(error) == "model 'm': input #0 needs a 'name'"


def test_id_version_parameters_and_requested_outputs_are_kept():
    message = request(tensor("A", "FP32", [1]), raw=[b"\0" * 4], id="req-9", model_version="2")
    message.parameters["priority"].int64_param = 3
    message.parameters["tag"].string_param = "cam0"
    message.parameters["flag"].bool_param = True
    output = message.outputs.add(name="Y")
    output.parameters["classification"].int64_param = 2
    decoded = decode_request(message)
    assert (decoded.model_name, decoded.model_version, decoded.id) == ("m", "2", "req-9")
    assert decoded.parameters == {"priority": 3, "tag": "cam0", "flag": True}
    assert [(o.name, o.parameters) for o in decoded.outputs] == [("Y", {"classification": 2})]


def test_shared_memory_needs_a_region_lease_as_over_http():
    item = tensor("A", "FP32", [1])
    item.parameters["shared_memory_region"].string_param = "region"
    item.parameters["shared_memory_byte_size"].int64_param = 4
    error = decode_error(request(item))
    assert error.code is ErrorCode.UNSUPPORTED
    assert str(error) == "model 'm', input 'A': shared memory inputs are not supported here"
    message = request(tensor("A", "FP32", [1]), raw=[b"\0" * 4])
    output = message.outputs.add(name="Y")
    output.parameters["shared_memory_region"].string_param = "region"
    output.parameters["shared_memory_byte_size"].int64_param = 4
    error = decode_error(message)
    assert str(error) == "model 'm', output 'Y': shared memory outputs are not supported here"


# -- responses ----------------------------------------------------------------------------


def test_response_outputs_travel_raw_in_order_with_their_shapes():
    f32 = np.arange(6, dtype=np.float32).reshape(2, 3)
    f16 = np.array([1.5, -0.25], dtype=np.float16)
    text = np.array([b"ab", b""], dtype=object)
    response = InferResponse(
        "m",
        "1",
        [Tensor("F", "FP32", f32), Tensor("H", "FP16", f16), Tensor("S", "BYTES", text)],
        id="req-1",
        parameters={"sequence_end": True, "count": 2},
    )
    message = encode_response(response)
    assert (message.model_name, message.model_version, message.id) == ("m", "1", "req-1")
    assert [(o.name, o.datatype, list(o.shape)) for o in message.outputs] == [
        ("F", "FP32", [2, 3]),
        ("H", "FP16", [2]),
        ("S", "BYTES", [2]),
    ]
    assert message.raw_output_contents[0] == f32.tobytes()
    assert message.raw_output_contents[1] == f16.tobytes()
    assert message.raw_output_contents[2] == bytes_wire(b"ab", b"")
    assert message.parameters["sequence_end"].bool_param is True
    assert message.parameters["count"].int64_param == 2


def test_shared_memory_outputs_carry_no_parameters_as_in_triton(shm_key):
    registry = SharedMemoryRegistry()
    registry.register("out", shm_key(128), 0, 128)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    response = InferResponse(
        "simple", "1", [Tensor("OUTPUT0", "INT32", a + 1), Tensor("OUTPUT1", "INT32", a - 1)]
    )
    place = {"shared_memory_region": "out", "shared_memory_byte_size": 64}
    asked = [
        RequestedOutput("OUTPUT0", place),
        RequestedOutput("OUTPUT1", {**place, "shared_memory_offset": 64}),
    ]
    with registry.lease() as lease:
        message = encode_response(response, InferRequest("simple", [], outputs=asked), lease)
    assert [(o.name, o.datatype, list(o.shape), dict(o.parameters)) for o in message.outputs] == [
        ("OUTPUT0", "INT32", [1, 16], {}),
        ("OUTPUT1", "INT32", [1, 16], {}),
    ]
    assert list(message.raw_output_contents) == [b"", b""]
    registry.close()


def test_non_contiguous_output_is_sent_row_major():
    data = np.arange(6, dtype=np.int32).reshape(2, 3).T
    message = encode_response(InferResponse("m", "1", [Tensor("T", "INT32", data)]))
    assert message.raw_output_contents[0] == np.ascontiguousarray(data).tobytes()
    assert list(message.outputs[0].shape) == [3, 2]
