"""decode_request / encode_response and the JSON and binary tensor codecs, in
process: exact error texts, datatypes, and the no-copy promise of binary data."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, Unsupported
from edgebox.protocol import tensor_codec
from edgebox.protocol.http import json_codec
from edgebox.protocol.http.error_map import error_response
from edgebox.protocol.http.infer_codec import HEADER_LENGTH, decode_request, encode_response
from edgebox.protocol.shared_memory import SharedMemoryRegistry
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor, numpy_dtype
from triton_answers import SHARED_MEMORY_OUTPUTS_HTTP

MODEL = "m"


def request_body(document: dict, *binary: bytes) -> tuple[memoryview, dict[str, str]]:
    """The body and headers a client sends: JSON only, or a JSON header then binary."""
    header = json.dumps(document).encode()
    headers = {HEADER_LENGTH: str(len(header))} if binary else {}
    return memoryview(bytearray(header + b"".join(binary))), headers


def decode(document: dict, *binary: bytes) -> tuple[InferRequest, bool]:
    body, headers = request_body(document, *binary)
    return decode_request(body, headers, MODEL, "")


def json_input(name: str, datatype: str, shape: list, data) -> dict:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def binary_input(name: str, datatype: str, shape: list, size: int) -> dict:
    return {
        "name": name,
        "datatype": datatype,
        "shape": shape,
        "parameters": {"binary_data_size": size},
    }


def decode_error(document: dict, *binary: bytes, headers: dict | None = None) -> EdgeboxError:
    body, default_headers = request_body(document, *binary)
    with pytest.raises(EdgeboxError) as caught:
        decode_request(body, headers if headers is not None else default_headers, MODEL, "")
    return caught.value


def bytes_wire(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


# -- JSON tensors -----------------------------------------------------------------


def test_json_data_nested_and_flat_give_the_same_tensor():
    flat, _ = decode({"inputs": [json_input("X", "FP32", [2, 3], [1, 2, 3, 4, 5, 6])]})
    nested, _ = decode({"inputs": [json_input("X", "FP32", [2, 3], [[1, 2, 3], [4, 5, 6]])]})
    for request in (flat, nested):
        (tensor,) = request.inputs
        assert (tensor.name, tensor.datatype) == ("X", "FP32")
        assert tensor.data.dtype == np.float32
        np.testing.assert_array_equal(tensor.data, np.arange(1, 7, dtype=np.float32).reshape(2, 3))


JSON_VALUES = {
    "BOOL": [True, False, True],
    "UINT8": [0, 7, 255],
    "UINT16": [0, 1, 65535],
    "UINT32": [0, 1, 2**32 - 1],
    "UINT64": [0, 1, 2**64 - 1],
    "INT8": [-128, 0, 127],
    "INT16": [-(2**15), 0, 2**15 - 1],
    "INT32": [-(2**31), 0, 2**31 - 1],
    "INT64": [-(2**63), 0, 2**63 - 1],
    "FP16": [0.5, -1.25, 65504.0],
    "FP32": [0.25, -3.5, 2.0**100],
    "FP64": [1e300, -2.5e-300, 0.1],
}


@pytest.mark.parametrize("datatype", sorted(JSON_VALUES))
def test_json_datatypes_round_trip(datatype):
    values = JSON_VALUES[datatype]
    request, _ = decode({"inputs": [json_input("X", datatype, [1, 3], values)]})
    tensor = request.inputs[0]
    assert tensor.datatype == datatype
    assert tensor.data.dtype == numpy_dtype(datatype)
    assert tensor.data.shape == (1, 3)
    assert tensor.data.ravel().tolist() == values
    assert json_codec.encode_tensor("here", tensor) == values


def test_json_bytes_are_utf8_strings():
    request, _ = decode({"inputs": [json_input("T", "BYTES", [2, 1], [["lane"], ["caf\u00e9"]])]})
    tensor = request.inputs[0]
    assert tensor.data.dtype == object
    assert tensor.data.shape == (2, 1)
    assert tensor.data.ravel().tolist() == [b"lane", "caf\u00e9".encode()]
    assert json_codec.encode_tensor("here", tensor) == ["lane", "caf\u00e9"]


def test_json_bf16_rounds_through_float32_bits():
    values = [1.0, -2.0, 0.15625, 1.00390625, 1.01171875]
    request, _ = decode({"inputs": [json_input("X", "BF16", [5], values)]})
    tensor = request.inputs[0]
    assert tensor.data.dtype == np.uint16
    # the top 16 bits of the float32, rounded to nearest even
    assert tensor.data.tolist() == [0x3F80, 0xC000, 0x3E20, 0x3F80, 0x3F82]
    assert json_codec.encode_tensor("here", tensor) == [1.0, -2.0, 0.15625, 1.0, 1.015625]


def test_json_scalar_shape():
    request, _ = decode({"inputs": [json_input("S", "INT32", [], 5)]})
    assert request.inputs[0].data.shape == ()
    assert request.inputs[0].data.item() == 5


@pytest.mark.parametrize(
    ("datatype", "data", "message"),
    [
        ("INT32", [1, 1.5], "INT32 data must be integers in JSON, got float 1.5"),
        ("UINT8", [1, "2"], "UINT8 data must be integers in JSON, got str '2'"),
        ("INT64", [True, 1], "INT64 data must be integers in JSON, got bool True"),
        ("BOOL", [True, 1], "BOOL data must be booleans in JSON, got int 1"),
        ("BYTES", ["a", 2], "BYTES data must be strings in JSON, got int 2"),
    ],
)
def test_json_data_of_the_wrong_kind_is_refused_not_converted(datatype, data, message):
    error = decode_error({"inputs": [json_input("X", datatype, [2], data)]})
    assert isinstance(error, InvalidArgument)
    assert str(error) == f"model 'm', input 'X': {message}"


def test_json_integer_out_of_range_is_refused():
    error = decode_error({"inputs": [json_input("X", "INT8", [2], [1, 300])]})
    assert str(error).startswith("model 'm', input 'X': 'data' does not hold INT8 values (")


def test_json_data_length_must_match_the_shape():
    error = decode_error({"inputs": [json_input("X", "FP32", [2, 2], [1, 2, 3])]})
    assert isinstance(error, InvalidArgument)
    assert str(error) == "model 'm', input 'X': 'data' holds 3 elements, shape [2, 2] needs 4"
    error = decode_error({"inputs": [json_input("T", "BYTES", [3], ["a", "b"])]})
    assert str(error) == "model 'm', input 'T': 'data' holds 2 elements, shape [3] needs 3"


def test_bytes_output_that_is_not_utf8_needs_binary_data():
    tensor = Tensor("OUT", "BYTES", np.array([b"\xff"], dtype=object))
    with pytest.raises(InvalidArgument) as caught:
        json_codec.encode_tensor("model 'm' version 1", tensor)
    assert str(caught.value) == (
        "model 'm' version 1, output 'OUT': holds bytes that are not UTF-8; "
        "request it with binary_data"
    )


# -- binary tensors -------------------------------------------------------------------

BINARY_ARRAYS = {
    "BOOL": np.array([[True, False], [False, True]]),
    "UINT8": np.array([[0, 255], [1, 2]], dtype=np.uint8),
    "UINT16": np.array([[0, 65535], [1, 2]], dtype=np.uint16),
    "UINT32": np.array([[0, 2**32 - 1], [1, 2]], dtype=np.uint32),
    "UINT64": np.array([[0, 2**64 - 1], [1, 2]], dtype=np.uint64),
    "INT8": np.array([[-128, 127], [1, 2]], dtype=np.int8),
    "INT16": np.array([[-(2**15), 2**15 - 1], [1, 2]], dtype=np.int16),
    "INT32": np.array([[-(2**31), 2**31 - 1], [1, 2]], dtype=np.int32),
    "INT64": np.array([[-(2**63), 2**63 - 1], [1, 2]], dtype=np.int64),
    "FP16": np.array([[0.5, -1.25], [65504, 0]], dtype=np.float16),
    "FP32": np.array([[0.5, -1.25], [1e30, 0]], dtype=np.float32),
    "FP64": np.array([[0.5, -1.25], [1e300, 0]], dtype=np.float64),
    "BF16": np.array([[0x3F80, 0xC000], [0x3E20, 0]], dtype=np.uint16),
}


@pytest.mark.parametrize("datatype", sorted(BINARY_ARRAYS))
def test_binary_tensors_are_views_over_the_body(datatype):
    array = BINARY_ARRAYS[datatype]
    body, headers = request_body(
        {"inputs": [binary_input("A", datatype, [2, 2], array.nbytes)]}, array.tobytes()
    )
    request, _ = decode_request(body, headers, MODEL, "")
    tensor = request.inputs[0]
    assert tensor.datatype == datatype
    assert tensor.data.dtype == numpy_dtype(datatype)
    np.testing.assert_array_equal(tensor.data, array)
    whole = np.frombuffer(body, dtype=np.uint8)
    assert np.shares_memory(tensor.data, whole)
    assert tensor.data.flags.writeable
    tensor.data.reshape(-1).view(np.uint8)[0] ^= 0xFF
    assert whole[int(headers[HEADER_LENGTH])] == array.reshape(-1).view(np.uint8)[0] ^ 0xFF


def test_several_binary_inputs_follow_the_header_in_order():
    first = np.arange(4, dtype=np.float32)
    second = np.arange(3, dtype=np.int64)
    body, headers = request_body(
        {
            "inputs": [
                binary_input("A", "FP32", [4], 16),
                json_input("J", "INT32", [1], [9]),
                binary_input("B", "INT64", [3], 24),
            ]
        },
        first.tobytes(),
        second.tobytes(),
    )
    request, _ = decode_request(body, headers, MODEL, "")
    assert [t.name for t in request.inputs] == ["A", "J", "B"]
    np.testing.assert_array_equal(request.inputs[0].data, first)
    np.testing.assert_array_equal(request.inputs[1].data, [9])
    np.testing.assert_array_equal(request.inputs[2].data, second)


def test_binary_bytes_are_length_prefixed():
    wire = bytes_wire(b"abc", b"", b"\xff\x00")
    request, _ = decode({"inputs": [binary_input("T", "BYTES", [3], len(wire))]}, wire)
    tensor = request.inputs[0]
    assert tensor.data.dtype == object
    assert tensor.data.tolist() == [b"abc", b"", b"\xff\x00"]
    assert tensor_codec.serialize_bytes(tensor.data) == wire
    assert tensor_codec.encode_tensor(tensor) == wire
    assert tensor_codec.serialize_bytes(np.array(["caf\u00e9", "x"], dtype=object)) == bytes_wire(
        "caf\u00e9".encode(), b"x"
    )


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (bytes_wire(b"abc") + b"\x01\x00", "BYTES data ends after 1 of 2 elements"),
        (
            bytes_wire(b"abc") + struct.pack("<I", 10) + b"xy",
            "BYTES element 1 claims 10 bytes but only 2 remain",
        ),
        (bytes_wire(b"a", b"b") + b"zz", "2 bytes left over after 2 BYTES elements"),
    ],
    ids=["short-length", "short-element", "left-over"],
)
def test_malformed_binary_bytes_are_refused(wire, message):
    error = decode_error({"inputs": [binary_input("T", "BYTES", [2], len(wire))]}, wire)
    assert isinstance(error, InvalidArgument)
    assert str(error) == f"model 'm', input 'T': {message}"


def test_binary_data_size_must_match_the_shape_naming_the_input():
    error = decode_error({"inputs": [binary_input("IMAGES", "FP32", [2, 2], 12)]}, b"\0" * 12)
    assert isinstance(error, InvalidArgument)
    assert str(error) == (
        "model 'm', input 'IMAGES': binary_data_size is 12 but shape [2, 2] of FP32 needs 16 bytes"
    )


def test_binary_data_size_past_the_end_of_the_body():
    error = decode_error({"inputs": [binary_input("X", "FP32", [8], 32)]}, b"\0" * 16)
    assert str(error) == (
        "model 'm', input 'X': binary_data_size 32 runs past the end of the body "
        "(16 bytes of binary data left)"
    )


def test_binary_bytes_no_input_claims_are_refused():
    error = decode_error({"inputs": [binary_input("X", "FP32", [2], 8)]}, b"\0" * 12)
    assert str(error) == (
        "model 'm': the body has 4 bytes of binary data that no input claims "
        "(check binary_data_size)"
    )


def test_negative_binary_data_size_is_refused():
    error = decode_error({"inputs": [binary_input("X", "FP32", [2], -8)]}, b"\0" * 8)
    assert str(error) == "model 'm', input 'X': binary_data_size must be a non-negative integer"


def test_binary_outputs_are_the_arrays_themselves():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert tensor_codec.encode_tensor(Tensor("O", "FP32", array)) is array
    transposed = array.T
    encoded = tensor_codec.encode_tensor(Tensor("O", "FP32", transposed))
    assert encoded.flags.c_contiguous
    assert encoded.tobytes() == np.ascontiguousarray(transposed).tobytes()


# -- request framing and errors ---------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("abc", "Inference-Header-Content-Length must be an integer, got 'abc'"),
        ("999", "Inference-Header-Content-Length is 999 but the body holds {size} bytes"),
        ("-1", "Inference-Header-Content-Length is -1 but the body holds {size} bytes"),
    ],
)
def test_bad_inference_header_content_length(header, message):
    body, _ = request_body({"inputs": []}, b"\0" * 4)
    error = decode_error({"inputs": []}, b"\0" * 4, headers={HEADER_LENGTH: header})
    assert isinstance(error, InvalidArgument)
    assert str(error) == message.format(size=len(body))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "model 'm': request JSON is malformed: Expecting value: line 1 column 1 (char 0)"),
        (
            b'{"inputs": [}',
            "model 'm': request JSON is malformed: Expecting value: line 1 column 13 (char 12)",
        ),
        (b"[1, 2]", "model 'm': request JSON must be an object"),
        (b"{}", "model 'm': request needs an 'inputs' list"),
        (b'{"inputs": {}}', "model 'm': request needs an 'inputs' list"),
        (b'{"inputs": [], "id": 7}', "model 'm': 'id' must be a string"),
        (b'{"inputs": [], "parameters": [1]}', "model 'm': 'parameters' must be an object"),
        (b'{"inputs": [], "outputs": {"a": 1}}', "model 'm': 'outputs' must be a list"),
        (b'{"inputs": [], "outputs": [{}]}', "model 'm': each requested output needs a 'name'"),
        (b'{"inputs": [7]}', "model 'm': input #0 must be an object"),
        (b'{"inputs": [{"datatype": "FP32"}]}', "model 'm': input #0 needs a 'name'"),
    ],
)
def test_malformed_request_documents(body, message):
    with pytest.raises(InvalidArgument) as caught:
        decode_request(memoryview(bytearray(body)), {}, MODEL, "")
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            {"name": "X", "datatype": "FP8", "shape": [1], "data": [1]},
            "model 'm', input 'X': unknown datatype 'FP8'",
        ),
        (
            {"name": "X", "shape": [1], "data": [1]},
            "model 'm', input 'X': unknown datatype None",
        ),
        (
            {"name": "X", "datatype": "FP32", "shape": [2, -1], "data": [1]},
            "model 'm', input 'X': 'shape' must be a list of non-negative integers, got [2, -1]",
        ),
        (
            {"name": "X", "datatype": "FP32", "shape": [True], "data": [1]},
            "model 'm', input 'X': 'shape' must be a list of non-negative integers, got [True]",
        ),
        (
            {"name": "X", "datatype": "FP32", "shape": [1]},
            "model 'm', input 'X': needs 'data' or parameters.binary_data_size",
        ),
        (
            {"name": "X", "datatype": "FP32", "shape": [1], "data": [1], "parameters": 3},
            "model 'm', input 'X': 'parameters' must be an object",
        ),
    ],
)
def test_malformed_inputs(item, message):
    error = decode_error({"inputs": [item]})
    assert isinstance(error, InvalidArgument)
    assert str(error) == message


def test_shared_memory_needs_a_region_lease():
    item = json_input("X", "FP32", [1], [1])
    item["parameters"] = {"shared_memory_region": "r", "shared_memory_byte_size": 4}
    error = decode_error({"inputs": [item]})
    assert isinstance(error, Unsupported)
    assert error.code is ErrorCode.UNSUPPORTED
    assert str(error) == "model 'm', input 'X': shared memory inputs are not supported here"
    response = error_response(error)
    assert response.status == 400
    assert json.loads(response.body[0]) == {"error": str(error)}

    output = {
        "name": "Y",
        "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 4},
    }
    error = decode_error({"inputs": [json_input("X", "FP32", [1], [1])], "outputs": [output]})
    assert isinstance(error, Unsupported)
    assert str(error) == "model 'm', output 'Y': shared memory outputs are not supported here"


def test_request_id_parameters_and_requested_outputs_are_kept():
    request, binary_default = decode(
        {
            "id": "req-42",
            "inputs": [json_input("X", "FP32", [1], [1.0])],
            "outputs": [{"name": "A", "parameters": {"binary_data": True, "classification": 2}}],
            "parameters": {"binary_data_output": True, "priority": 1},
        }
    )
    assert (request.model_name, request.model_version, request.id) == ("m", "", "req-42")
    assert request.outputs == [RequestedOutput("A", {"binary_data": True, "classification": 2})]
    assert request.parameters == {"binary_data_output": True, "priority": 1}
    assert binary_default is True
    plain, binary_default = decode({"inputs": [json_input("X", "FP32", [1], [1.0])]})
    assert (plain.id, plain.outputs, binary_default) == ("", [], False)


# -- responses ----------------------------------------------------------------------------


def _response(**kwargs) -> InferResponse:
    outputs = [
        Tensor("A", "FP32", np.array([[1.5, 2.5]], dtype=np.float32)),
        Tensor("B", "BYTES", np.array([b"x", b"yz"], dtype=object)),
    ]
    return InferResponse("m", "3", outputs, **kwargs)


def _split(http_response) -> tuple[dict, bytes]:
    joined = b"".join(
        b.tobytes() if isinstance(b, np.ndarray) else bytes(b) for b in http_response.body
    )
    length = dict(http_response.headers).get("Inference-Header-Content-Length")
    if length is None:
        return json.loads(joined), b""
    return json.loads(joined[: int(length)]), joined[int(length) :]


def test_response_is_json_by_default_and_echoes_the_id():
    http_response = encode_response(_response(id="req-1"), InferRequest("m", []), False)
    assert http_response.status == 200
    assert http_response.content_type == "application/json"
    assert http_response.headers == []
    document, binary = _split(http_response)
    assert binary == b""
    assert document == {
        "model_name": "m",
        "model_version": "3",
        "outputs": [
            {"name": "A", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]},
            {"name": "B", "datatype": "BYTES", "shape": [2], "data": ["x", "yz"]},
        ],
        "id": "req-1",
    }


def test_response_without_id_has_no_id_and_keeps_parameters():
    http_response = encode_response(
        _response(parameters={"sequence_end": True}), InferRequest("m", []), False
    )
    document, _ = _split(http_response)
    assert "id" not in document
    assert document["parameters"] == {"sequence_end": True}


def test_binary_data_output_sends_every_output_binary_without_copying():
    response = _response()
    http_response = encode_response(response, InferRequest("m", []), True)
    assert http_response.content_type == "application/octet-stream"
    document, binary = _split(http_response)
    header_length = int(dict(http_response.headers)["Inference-Header-Content-Length"])
    assert header_length == len(http_response.body[0])
    assert [o["parameters"] for o in document["outputs"]] == [
        {"binary_data_size": 8},
        {"binary_data_size": 4 + 1 + 4 + 2},
    ]
    assert all("data" not in o for o in document["outputs"])
    assert http_response.body[1] is response.outputs[0].data
    assert binary == np.array([1.5, 2.5], dtype=np.float32).tobytes() + bytes_wire(b"x", b"yz")


def test_per_output_binary_data_overrides_the_default():
    request = InferRequest(
        "m",
        [],
        outputs=[
            RequestedOutput("A", {"binary_data": False}),
            RequestedOutput("B", {"binary_data": True}),
        ],
    )
    document, binary = _split(encode_response(_response(), request, True))
    assert document["outputs"][0]["data"] == [1.5, 2.5]
    assert document["outputs"][1]["parameters"] == {"binary_data_size": 11}
    assert binary == bytes_wire(b"x", b"yz")

    request.outputs = [RequestedOutput("A", {"binary_data": True}), RequestedOutput("B")]
    document, binary = _split(encode_response(_response(), request, False))
    assert document["outputs"][0]["parameters"] == {"binary_data_size": 8}
    assert document["outputs"][1]["data"] == ["x", "yz"]
    assert binary == np.array([1.5, 2.5], dtype=np.float32).tobytes()


def test_bf16_and_bool_outputs_on_the_wire():
    response = InferResponse(
        "m",
        "1",
        [
            Tensor("H", "BF16", np.array([0x3F80, 0xC000], dtype=np.uint16)),
            Tensor("F", "BOOL", np.array([True, False])),
        ],
    )
    document, _ = _split(encode_response(response, InferRequest("m", []), False))
    assert [o["data"] for o in document["outputs"]] == [[1.0, -2.0], [True, False]]
    document, binary = _split(encode_response(response, InferRequest("m", []), True))
    assert [o["parameters"]["binary_data_size"] for o in document["outputs"]] == [4, 2]
    assert binary == struct.pack("<HH", 0x3F80, 0xC000) + b"\x01\x00"


def test_shared_memory_outputs_are_listed_as_triton_lists_them(shm_key):
    """perf_analyzer --shared-memory system reads any output parameters as
    binary data, so a parameter on them failed every one of its requests."""
    registry = SharedMemoryRegistry()
    registry.register("OUTPUT0", shm_key(64), 0, 64)
    registry.register("OUTPUT1", shm_key(128), 0, 128)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    response = InferResponse(
        "simple", "1", [Tensor("OUTPUT0", "INT32", a + 1), Tensor("OUTPUT1", "INT32", a - 1)]
    )
    asked = [
        ("OUTPUT0", {"shared_memory_region": "OUTPUT0", "shared_memory_byte_size": 64}),
        (
            "OUTPUT1",
            {
                "shared_memory_region": "OUTPUT1",
                "shared_memory_offset": 64,
                "shared_memory_byte_size": 64,
            },
        ),
    ]
    request = InferRequest("simple", [], outputs=[RequestedOutput(n, p) for n, p in asked])
    for binary_default in (False, True):
        with registry.lease() as lease:
            http_response = encode_response(response, request, binary_default, lease)
        assert http_response.content_type == "application/json"
        assert _split(http_response) == (SHARED_MEMORY_OUTPUTS_HTTP, b"")
    registry.close()


# -- requests built to make parsing expensive ---------------------------------------------
# Each of these once cost the daemon seconds of GIL time, hundreds of MB or a 500; each is
# refused by a limit checked before any work that grows with the numbers in the request.


def test_shape_longer_than_max_rank_is_refused_before_its_dimensions_are_read():
    from edgebox.protocol.tensor_codec import MAX_RANK

    huge = 10**4000
    for item in (
        binary_input("X", "FP32", [huge] * (MAX_RANK + 8), 4),
        json_input("X", "FP32", [huge] * (MAX_RANK + 8), [1.0]),
        # Not even the type of a dimension is looked at past the limit.
        json_input("X", "FP32", [1] * MAX_RANK + ["a"], [1.0]),
    ):
        binary = (b"\0" * 4,) if "parameters" in item else ()
        error = decode_error({"inputs": [item]}, *binary)
        assert isinstance(error, InvalidArgument)
        assert str(error) == (
            f"model 'm', input 'X': shape has {len(item['shape'])} dimensions, "
            f"at most {MAX_RANK} are supported"
        )


def test_max_rank_shape_is_accepted():
    from edgebox.protocol.tensor_codec import MAX_RANK

    request, _ = decode({"inputs": [json_input("X", "FP32", [1] * MAX_RANK, [2.5])]})
    assert request.inputs[0].data.shape == (1,) * MAX_RANK


@pytest.mark.parametrize("shape", [[0, 2**63], [2**63, 0], [1, 10**4000]])
def test_dimension_beyond_int64_is_refused(shape):
    for item, binary in (
        (binary_input("X", "FP32", shape, 0), (b"",)),
        (json_input("X", "FP32", shape, []), ()),
        (json_input("X", "BYTES", shape, []), ()),
    ):
        error = decode_error({"inputs": [item]}, *binary)
        assert isinstance(error, InvalidArgument)
        index = next(i for i, d in enumerate(shape) if d >= 2**63)
        assert str(error) == (
            f"model 'm', input 'X': shape dimension {index} is larger than "
            "9223372036854775807 (dimensions are int64)"
        )


def test_empty_tensor_whose_other_dimensions_no_array_can_span_is_refused():
    shape = [0, 2**62, 2**62]
    error = decode_error({"inputs": [binary_input("X", "FP32", shape, 0)]}, b"")
    assert isinstance(error, InvalidArgument)
    assert str(error) == (
        "model 'm', input 'X': shape [0, 4611686018427387904, 4611686018427387904] spans "
        "more than 1152921504606846975 elements"
    )
    request, _ = decode({"inputs": [binary_input("X", "FP32", [0, 2**20, 2**20], 0)]}, b"")
    assert request.inputs[0].data.shape == (0, 2**20, 2**20)


def test_element_count_never_multiplies_past_int64():
    """The shape arithmetic stops as soon as the product passes the limit, so
    its cost is bounded by MAX_RANK multiplications of int64-sized numbers,
    whatever the client sent (it was quadratic in the digits it sent)."""
    from edgebox.protocol.tensor_codec import MAX_RANK, element_count

    products: list[int] = []

    class Dim(int):
        def __mul__(self, other):
            products.append(int(self) * int(other))
            return products[-1]

        __rmul__ = __mul__

    with pytest.raises(InvalidArgument):
        element_count("here", [Dim(2**62)] * MAX_RANK)
    assert products and max(p.bit_length() for p in products) <= 126
    assert element_count("here", [Dim(3), Dim(0), Dim(5)]) == 0
    assert element_count("here", [Dim(3), Dim(4), Dim(5)]) == 60
    assert element_count("here", []) == 1


@pytest.mark.parametrize("count", [10_000_000, 2**40])
def test_binary_bytes_count_the_body_cannot_hold_is_refused_without_allocating(count):
    """A 109-byte request once made the daemon allocate ~760 MB (an object array
    of ``count`` slots) before it found the data missing."""
    import tracemalloc

    body, headers = request_body(
        {"inputs": [binary_input("T", "BYTES", [count], 4)]}, bytes_wire(b"")
    )
    tracemalloc.start()
    try:
        with pytest.raises(InvalidArgument) as caught:
            decode_request(body, headers, MODEL, "")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value) == (
        f"model 'm', input 'T': {count} BYTES elements need at least {4 * count} bytes, got 4"
    )
    assert peak < 1_000_000


def test_json_nested_deeper_than_the_parser_allows_is_refused():
    depth = 100_000
    body = b'{"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": '
    body += b"[" * depth + b"]" * depth + b"}]}"
    with pytest.raises(InvalidArgument) as caught:
        decode_request(memoryview(bytearray(body)), {}, MODEL, "")
    assert str(caught.value) == "model 'm': request JSON nests too deeply"


def test_json_data_nested_deeper_than_numpy_allows_is_refused():
    data: list = [1.0]
    for _ in range(100):
        data = [data]
    error = decode_error({"inputs": [json_input("X", "FP32", [1], data)]})
    assert isinstance(error, InvalidArgument)
    assert str(error).startswith("model 'm', input 'X': 'data' does not hold FP32 values (")


def test_json_bytes_with_a_lone_surrogate_are_refused():
    error = decode_error({"inputs": [json_input("T", "BYTES", [2], ["ok", "bad \ud800"])]})
    assert isinstance(error, InvalidArgument)
    assert str(error) == (
        "model 'm', input 'T': BYTES element 1 is not valid Unicode text "
        "(it holds a lone surrogate); send arbitrary bytes as binary data"
    )
