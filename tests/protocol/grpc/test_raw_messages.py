"""The hand-walked ModelInfer messages agree with protobuf's own encoding:
round trips over varied messages, every truncation and random corruption of
a real one either refused as InvalidArgument or read exactly as protobuf
reads it, and the bytes path is the one the server registers."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from edgebox.errors import InvalidArgument
from edgebox.protocol.grpc.raw_messages import join_infer_response, split_infer_request
from edgebox.protocol.grpc.registration import add_inference_service


def _request(rng: random.Random) -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(
        model_name=rng.choice(["", "add_sub", "lane_detector", "x" * 300]),
        model_version=rng.choice(["", "1", "17"]),
        id=rng.choice(["", "req-1", "\u00e9" * 40]),
    )
    for index in range(rng.randint(0, 4)):
        entry = message.inputs.add(
            name=f"INPUT{index}", datatype="FP32", shape=[1, rng.randint(0, 300)]
        )
        entry.parameters["binary_data_size"].int64_param = rng.randint(0, 2**40)
        message.raw_input_contents.append(rng.randbytes(rng.choice([0, 1, 127, 128, 16384, 70000])))
    for index in range(rng.randint(0, 2)):
        message.outputs.add(name=f"OUTPUT{index}")
    if rng.random() < 0.5:
        message.parameters["priority"].uint64_param = rng.randint(0, 2**64 - 1)
        message.parameters["sequence_start"].bool_param = True
    return message


def _without_raw(message: pb.ModelInferRequest) -> pb.ModelInferRequest:
    copy = pb.ModelInferRequest()
    copy.CopyFrom(message)
    copy.ClearField("raw_input_contents")
    return copy


@pytest.mark.parametrize("seed", range(40))
def test_a_request_splits_into_protobufs_message_and_its_raw_contents(seed):
    rng = random.Random(seed)
    message = _request(rng)
    data = message.SerializeToString()
    parsed, raw = split_infer_request(data)
    assert parsed == _without_raw(message)
    assert [bytes(entry) for entry in raw] == list(message.raw_input_contents)
    assert all(entry.obj is data for entry in raw), "views into the received bytes, not copies"


def test_raw_contents_interleaved_with_other_fields_and_unknown_fields_keep_their_order():
    first = pb.ModelInferRequest(model_name="m", raw_input_contents=[b"a"])
    second = pb.ModelInferRequest(
        raw_input_contents=[b"bb"], inputs=[pb.ModelInferRequest.InferInputTensor(name="I")]
    )
    unknown = bytes([(14 << 3) | 2, 3]) + b"xyz" + bytes([(13 << 3) | 0, 5])
    data = first.SerializeToString() + unknown + second.SerializeToString()
    parsed, raw = split_infer_request(data)
    whole = pb.ModelInferRequest.FromString(data)
    assert [bytes(entry) for entry in raw] == list(whole.raw_input_contents) == [b"a", b"bb"]
    assert parsed.SerializeToString() == _without_raw(whole).SerializeToString()


def _agrees_with_protobuf(data: bytes) -> None:
    try:
        expected = pb.ModelInferRequest.FromString(data)
    except DecodeError:
        expected = None
    try:
        parsed, raw = split_infer_request(data)
    except InvalidArgument:
        return  # refused: never a wrong reading
    assert expected is not None, "protobuf refuses what was read"
    assert parsed == _without_raw(expected)
    assert [bytes(entry) for entry in raw] == list(expected.raw_input_contents)


def test_every_truncation_is_refused_or_read_as_protobuf_reads_it():
    data = _request(random.Random(3)).SerializeToString()
    for end in range(0, len(data), max(1, len(data) // 2000)):
        _agrees_with_protobuf(data[:end])


@pytest.mark.parametrize("seed", range(20))
def test_corrupted_requests_are_refused_or_read_as_protobuf_reads_them(seed):
    rng = random.Random(seed)
    data = bytearray(_request(rng).SerializeToString()[:4096])
    for _ in range(200):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            if mutated:
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        _agrees_with_protobuf(bytes(mutated))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (bytes([0x3A, 0x05]) + b"ab", "field 7 says 5 bytes, 2 left"),
        (bytes([0x3A, 0xFF, 0xFF]), "a varint at the end"),
        (bytes([0x0B]), "wire type 3"),
        (bytes([0x00, 0x01]), "field number 0"),
        (bytes([0x08]) + bytes([0xFF] * 11), "a varint over 10 bytes"),
    ],
)
def test_malformed_requests_name_what_is_wrong(data, says):
    with pytest.raises(InvalidArgument, match=says):
        split_infer_request(data)


@pytest.mark.parametrize("seed", range(20))
def test_a_joined_response_is_the_message_protobuf_would_have_built(seed):
    rng = random.Random(seed)
    message = pb.ModelInferResponse(model_name="lane", model_version="2", id=rng.choice(["", "a"]))
    raw = []
    for index in range(rng.randint(0, 4)):
        message.outputs.add(name=f"OUTPUT{index}", datatype="FP32", shape=[rng.randint(0, 9)])
        raw.append(rng.randbytes(rng.choice([0, 1, 127, 128, 300, 2**14 + 1, 100000])))
    if rng.random() < 0.5:
        message.parameters["sequence_end"].bool_param = True
    expected = pb.ModelInferResponse()
    expected.CopyFrom(message)
    expected.raw_output_contents.extend(raw)
    joined = join_infer_response(message, raw)
    assert pb.ModelInferResponse.FromString(joined) == expected


def test_an_array_output_is_written_as_its_bytes():
    np = pytest.importorskip("numpy")
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    joined = join_infer_response(pb.ModelInferResponse(model_name="m"), [array, b""])
    assert list(pb.ModelInferResponse.FromString(joined).raw_output_contents) == [
        array.tobytes(),
        b"",
    ]


def test_a_message_that_already_holds_raw_outputs_is_not_joined():
    with pytest.raises(ValueError, match="already holds"):
        join_infer_response(pb.ModelInferResponse(raw_output_contents=[b"x"]), [b"y"])


class FakeService(service_pb2_grpc.GRPCInferenceServiceServicer):
    """The generated servicer's methods, and the one the registration adds."""

    def ModelInferRaw(self, data, context):
        return data


def test_the_server_registers_model_infer_as_bytes():
    with ThreadPoolExecutor(1) as pool:
        assert add_inference_service(FakeService(), grpc.server(pool)) is True
