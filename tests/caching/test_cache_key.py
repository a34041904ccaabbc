"""The cache key covers everything that can change an answer: every input
byte, datatype and shape, the model and version, the outputs asked for and
the parameters a model can read; and nothing that cannot (input order, the
request id, how the answer travels)."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.caching.cache_key import request_key
from edgebox.tensors import InferRequest, RequestedOutput, Tensor


def add_sub_request(a: np.ndarray | None = None, **fields) -> InferRequest:
    a = np.arange(4, dtype=np.float32).reshape(1, 4) if a is None else a
    b = np.full((1, 4), 2, dtype=np.float32)
    return InferRequest(
        "add_sub", [Tensor("INPUT0", "FP32", a), Tensor("INPUT1", "FP32", b)], **fields
    )


def key(request: InferRequest, model: str = "add_sub", version: str = "1") -> bytes:
    return request_key(model, version, request)


def test_identical_requests_share_a_key_whatever_owns_their_arrays() -> None:
    first = add_sub_request()
    second = add_sub_request(np.arange(4, dtype=np.float32).reshape(1, 4).copy())
    assert key(first) == key(second)
    assert len(key(first)) == 32


def test_every_input_byte_changes_the_key() -> None:
    base = np.arange(4, dtype=np.float32).reshape(1, 4)
    keys = {key(add_sub_request(base))}
    raw = base.tobytes()
    for index in range(len(raw)):
        changed = bytearray(raw)
        changed[index] ^= 0x01
        array = np.frombuffer(bytes(changed), dtype=np.float32).reshape(1, 4)
        keys.add(key(add_sub_request(array)))
    assert len(keys) == len(raw) + 1


def test_the_same_bytes_in_another_shape_or_datatype_are_another_request() -> None:
    data = np.arange(4, dtype=np.float32)
    as_row = add_sub_request(data.reshape(1, 4))
    as_column = add_sub_request(data.reshape(4, 1))
    as_int = add_sub_request(data.reshape(1, 4))
    as_int.inputs[0] = Tensor("INPUT0", "INT32", data.view(np.int32).reshape(1, 4))
    assert len({key(as_row), key(as_column), key(as_int)}) == 3


def test_model_version_and_input_names_are_part_of_the_key() -> None:
    request = add_sub_request()
    renamed = add_sub_request()
    renamed.inputs[1] = Tensor("INPUT2", "FP32", renamed.inputs[1].data)
    assert len({key(request), key(request, model="other"), key(request, version="2")}) == 3
    assert key(renamed) != key(request)


def test_input_order_and_the_request_id_do_not_matter() -> None:
    request = add_sub_request(id="a")
    swapped = add_sub_request(id="b")
    swapped.inputs.reverse()
    assert key(request) == key(swapped)


def test_a_strided_view_hashes_as_its_contiguous_copy() -> None:
    wide = np.arange(8, dtype=np.float32).reshape(1, 8)
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    assert key(add_sub_request(view)) == key(add_sub_request(view.copy()))


def test_the_outputs_asked_for_and_their_order_are_part_of_the_key() -> None:
    every = add_sub_request()
    one = add_sub_request(outputs=[RequestedOutput("OUTPUT1")])
    both = add_sub_request(outputs=[RequestedOutput("OUTPUT0"), RequestedOutput("OUTPUT1")])
    flipped = add_sub_request(outputs=[RequestedOutput("OUTPUT1"), RequestedOutput("OUTPUT0")])
    assert len({key(every), key(one), key(both), key(flipped)}) == 4


def test_per_output_parameters_only_shape_the_answer_so_they_are_not_hashed() -> None:
    plain = add_sub_request(outputs=[RequestedOutput("OUTPUT0")])
    shaped = add_sub_request(
        outputs=[
            RequestedOutput(
                "OUTPUT0",
                {"binary_data": True, "classification": 2, "shared_memory_region": "out"},
            )
        ]
    )
    assert key(plain) == key(shaped)


def test_parameters_a_model_can_read_are_hashed_transport_ones_are_not() -> None:
    plain = add_sub_request()
    custom = add_sub_request(parameters={"threshold": 0.5})
    other = add_sub_request(parameters={"threshold": 0.7})
    transport = add_sub_request(
        parameters={"binary_data_output": True, "priority": 1, "timeout": 100}
    )
    assert len({key(plain), key(custom), key(other)}) == 3
    assert key(transport) == key(plain)


@pytest.mark.parametrize(
    ("first", "second"),
    [([b"ab", b"c"], [b"a", b"bc"]), ([b"abc"], [b"abc", b""]), ([b"a"], [b"b"])],
)
def test_bytes_elements_keep_their_boundaries(first: list, second: list) -> None:
    def request(items: list) -> InferRequest:
        return InferRequest("text", [Tensor("TEXT", "BYTES", np.array(items, dtype=object))])

    assert key(request(first), "text") != key(request(second), "text")
    assert key(request(first), "text") == key(request(list(first)), "text")


def test_another_load_of_the_same_version_is_another_key() -> None:
    request = add_sub_request()
    first = request_key("add_sub", "1", request, ("digest-a", (1, 2)))
    same = request_key("add_sub", "1", request, ("digest-a", (1, 2)))
    reloaded = request_key("add_sub", "1", request, ("digest-b", (1, 3)))
    assert first == same != reloaded
