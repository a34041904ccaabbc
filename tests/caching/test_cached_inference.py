"""The dataplane in front of the response cache, with real models in
process: a repeated request is answered from the cache without running the
model, and counted as Triton 2.51 counts it (a success and a cache hit,
nothing computed); anything else runs, and an error is never kept."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.caching.response_cache import ResponseCache
from edgebox.dataplane import DataPlane
from edgebox.errors import EdgeboxError
from edgebox.scheduling.statistics import StatisticDuration
from edgebox.tensors import InferRequest, RequestedOutput, Tensor
from fakes import execute_counter
from fakes.response_sink import FakeResponseSink
from model_fixtures import (
    ONE_CPU_INSTANCE,
    PYTHON_BACKEND,
    add_add_sub,
    ensemble_config,
    model_config,
    write_model,
)

CACHED = "\nresponse_cache { enable: true }\n"

COUNTING_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils
from fakes import execute_counter


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            execute_counter.requests_seen[self.name] += 1
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if (x < 0).any():
                error = pb_utils.TritonError("negative input")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            y = (x * 10).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", y)]))
        return responses
"""


def counting_model(repository, name: str = "tens", extra: str = CACHED) -> None:
    config = model_config(
        name,
        PYTHON_BACKEND,
        {"X": ("FP32", [2])},
        {"Y": ("FP32", [2])},
        max_batch_size=4,
        extra=ONE_CPU_INSTANCE + extra,
    )
    write_model(repository, name, config, {"1/model.py": COUNTING_MODEL})


@pytest.fixture
def cache() -> ResponseCache:
    return ResponseCache(1 << 20)


@pytest.fixture
def cached_stack(stack, cache):
    """The in-process stack whose dataplane has a response cache."""
    execute_counter.requests_seen.clear()
    stack.dataplane = DataPlane(stack.registry, response_cache=cache)
    return stack


def x_request(model: str, *values: float, **fields) -> InferRequest:
    data = np.array([values], dtype=np.float32)
    return InferRequest(model, [Tensor("X", "FP32", data)], **fields)


def add_sub_request(value: float = 1.0, **fields) -> InferRequest:
    data = np.full((1, 16), value, dtype=np.float32)
    return InferRequest(
        "add_sub", [Tensor("INPUT0", "FP32", data), Tensor("INPUT1", "FP32", data)], **fields
    )


def phases(stack, model: str):
    return stack.dataplane.statistics(model)[0].counts


def test_a_repeated_request_is_answered_from_the_cache_and_counted_as_triton_does(
    cached_stack, tmp_path
):
    add_add_sub(tmp_path, config_extra=CACHED)
    cached_stack.manager.load_model("add_sub")
    first = cached_stack.dataplane.infer(add_sub_request(3.0, id="a"))
    second = cached_stack.dataplane.infer(add_sub_request(3.0, id="b"))

    assert (second.model_name, second.model_version, second.id) == ("add_sub", "1", "b")
    for name in ("OUTPUT0", "OUTPUT1"):
        np.testing.assert_array_equal(second.output(name).data, first.output(name).data)
    counts = phases(cached_stack, "add_sub")
    stats = counts.inference_stats
    assert (counts.inference_count, counts.execution_count) == (1, 1)
    assert (stats.success.count, stats.queue.count) == (2, 2)
    assert (stats.cache_hit.count, stats.cache_miss.count) == (1, 1)
    assert stats.cache_hit.ns > 0 and stats.cache_miss.ns > 0
    assert stats.compute_infer.count == stats.compute_input.count == 1
    assert counts.request_latency.count == 2


def test_a_different_request_is_a_miss_and_runs(cached_stack, tmp_path):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    answers = [cached_stack.dataplane.infer(x_request("tens", v, 1.0)) for v in (1.0, 2.0)]

    assert [a.output("Y").data.tolist() for a in answers] == [[[10.0, 10.0]], [[20.0, 10.0]]]
    assert execute_counter.requests_seen["tens"] == 2
    stats = phases(cached_stack, "tens").inference_stats
    assert (stats.cache_hit.count, stats.cache_miss.count) == (0, 2)


def test_a_hit_does_not_call_the_python_models_execute(cached_stack, tmp_path):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    for _ in range(3):
        answer = cached_stack.dataplane.infer(x_request("tens", 1.5, 2.0))
        assert answer.output("Y").data.tolist() == [[15.0, 20.0]]

    assert execute_counter.requests_seen["tens"] == 1
    assert phases(cached_stack, "tens").inference_stats.cache_hit.count == 2


def test_a_model_without_response_cache_never_hits(cached_stack, tmp_path, cache):
    counting_model(tmp_path, extra="")
    cached_stack.manager.load_model("tens")
    for _ in range(2):
        cached_stack.dataplane.infer(x_request("tens", 1.0, 2.0))

    assert execute_counter.requests_seen["tens"] == 2
    stats = phases(cached_stack, "tens").inference_stats
    assert stats.cache_hit == stats.cache_miss == StatisticDuration()
    assert cache.statistics().lookups == 0


def test_without_a_cache_a_model_enabling_it_runs_every_request(stack, tmp_path):
    execute_counter.requests_seen.clear()
    counting_model(tmp_path)
    stack.manager.load_model("tens")
    for _ in range(2):
        stack.dataplane.infer(x_request("tens", 1.0, 2.0))

    assert execute_counter.requests_seen["tens"] == 2
    stats = phases(stack, "tens").inference_stats
    assert stats.cache_hit == stats.cache_miss == StatisticDuration()


def test_an_error_is_never_kept(cached_stack, tmp_path, cache):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    for _ in range(2):
        with pytest.raises(EdgeboxError, match="negative input"):
            cached_stack.dataplane.infer(x_request("tens", -1.0, 2.0))

    assert execute_counter.requests_seen["tens"] == 2
    assert cache.statistics().entries == 0
    stats = phases(cached_stack, "tens").inference_stats
    assert (stats.cache_hit.count, stats.cache_miss.count) == (0, 2)


def test_a_hit_is_classified_as_the_request_asks(cached_stack, tmp_path):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    ranked = [RequestedOutput("Y", {"classification": 1})]
    plain = [RequestedOutput("Y")]
    first = cached_stack.dataplane.infer(x_request("tens", 1.0, 3.0, outputs=ranked))
    second = cached_stack.dataplane.infer(x_request("tens", 1.0, 3.0, outputs=plain))
    third = cached_stack.dataplane.infer(x_request("tens", 1.0, 3.0, outputs=ranked))

    assert execute_counter.requests_seen["tens"] == 1
    assert first.output("Y").data.tolist() == third.output("Y").data.tolist() == [[b"30.000000:1"]]
    assert second.output("Y").data.tolist() == [[10.0, 30.0]]


def test_a_client_changing_its_answer_does_not_change_the_next_one(cached_stack, tmp_path):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    first = cached_stack.dataplane.infer(x_request("tens", 1.0, 2.0))
    first.output("Y").data[:] = -7.0
    second = cached_stack.dataplane.infer(x_request("tens", 1.0, 2.0))

    assert second.output("Y").data.tolist() == [[10.0, 20.0]]
    assert not second.output("Y").data.flags.writeable


def test_an_ensemble_is_cached_at_the_top_and_its_step_does_not_run(cached_stack, tmp_path):
    counting_model(tmp_path, extra="")
    config = ensemble_config(
        "pipeline",
        {"IN": ("FP32", [2])},
        {"OUT": ("FP32", [2])},
        [("tens", {"X": "IN"}, {"Y": "OUT"})],
        max_batch_size=4,
    )
    write_model(tmp_path, "pipeline", config + CACHED, {"1/.keep": ""})
    cached_stack.manager.load_model("pipeline")
    request = InferRequest("pipeline", [Tensor("IN", "FP32", np.array([[2.0, 4.0]], np.float32))])
    for _ in range(2):
        answer = cached_stack.dataplane.infer(request)
        assert answer.output("OUT").data.tolist() == [[20.0, 40.0]]

    assert execute_counter.requests_seen["tens"] == 1
    stats = phases(cached_stack, "pipeline").inference_stats
    assert (stats.success.count, stats.cache_hit.count, stats.cache_miss.count) == (2, 1, 1)


def test_a_streamed_request_shares_the_cache_with_unary_ones(cached_stack, tmp_path):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    sink = FakeResponseSink()
    cached_stack.dataplane.infer_stream(x_request("tens", 4.0, 5.0, id="s1"), sink)
    sink.wait()
    unary = cached_stack.dataplane.infer(x_request("tens", 4.0, 5.0))
    again = FakeResponseSink()
    cached_stack.dataplane.infer_stream(x_request("tens", 4.0, 5.0, id="s2"), again)
    again.wait()

    assert execute_counter.requests_seen["tens"] == 1
    for response in (sink.only_final, unary, again.only_final):
        assert response.output("Y").data.tolist() == [[40.0, 50.0]]
    assert (again.only_final.id, again.only_final.model_version) == ("s2", "1")
    stats = phases(cached_stack, "tens").inference_stats
    assert (stats.cache_hit.count, stats.cache_miss.count) == (2, 1)


def test_a_streamed_error_is_not_kept(cached_stack, tmp_path, cache):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    for _ in range(2):
        sink = FakeResponseSink()
        cached_stack.dataplane.infer_stream(x_request("tens", -1.0, 5.0), sink)
        sink.wait()
        assert "negative input" in str(sink.only_final)

    assert execute_counter.requests_seen["tens"] == 2
    assert cache.statistics().entries == 0
    assert phases(cached_stack, "tens").inference_stats.cache_miss.count == 2


def test_a_version_reloaded_from_new_files_does_not_answer_from_the_old_ones(
    cached_stack, tmp_path
):
    counting_model(tmp_path)
    cached_stack.manager.load_model("tens")
    cached_stack.dataplane.infer(x_request("tens", 1.0, 2.0))
    model_py = tmp_path / "tens" / "1" / "model.py"
    model_py.write_text(model_py.read_text().replace("x * 10", "x * 100"))
    cached_stack.manager.load_model("tens")
    answer = cached_stack.dataplane.infer(x_request("tens", 1.0, 2.0))

    assert answer.output("Y").data.tolist() == [[100.0, 200.0]]
    assert execute_counter.requests_seen["tens"] == 2
