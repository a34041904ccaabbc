"""The batch rule ONNX Runtime and TensorRT instances share (``stacked_batch``)."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.backends.stacked_batch import split_rows, stack_inputs, stackable
from edgebox.errors import EdgeboxError
from edgebox.tensors import InferRequest, Tensor


def request(rows: int, width: int = 3, datatype: str = "FP32") -> InferRequest:
    data = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    return InferRequest("m", [Tensor("X", datatype, data), Tensor("Y", datatype, data + 100)])


def test_requests_stack_when_only_the_batch_dimension_differs() -> None:
    assert stackable([request(1), request(3)])
    assert not stackable([request(1), request(1, width=4)])
    assert not stackable([request(1), request(1, datatype="FP16")])
    scalar = InferRequest("m", [Tensor("X", "FP32", np.float32(1.0))])
    assert not stackable([scalar, scalar])


def test_inputs_stack_in_the_first_request_order() -> None:
    first, second = request(1), request(2)
    stacked = stack_inputs([first, second])
    assert list(stacked) == ["X", "Y"]
    assert stacked["X"].shape == (3, 3)
    np.testing.assert_array_equal(stacked["Y"][1:], second.input("Y").data)


def test_outputs_split_into_each_request_rows_as_views() -> None:
    merged = {"Z": np.arange(9).reshape(3, 3)}
    first, second = split_rows("model 'm' version 1", merged, [request(1), request(2)])
    np.testing.assert_array_equal(first["Z"], merged["Z"][:1])
    np.testing.assert_array_equal(second["Z"], merged["Z"][1:])
    assert np.shares_memory(second["Z"], merged["Z"])


def test_an_output_without_the_batch_dimension_fails_the_batch() -> None:
    with pytest.raises(EdgeboxError) as error:
        split_rows("model 'm' version 1", {"Z": np.zeros((2, 3))}, [request(1), request(2)])
    assert str(error.value) == (
        "model 'm' version 1: output 'Z' has shape [2, 3], which does not start with the "
        "batch size 3"
    )
