"""Triton's sequence examples end to end, through the real daemon and the
real tritonclient: what NVIDIA's simple_http_sequence_sync_infer_client.py,
simple_grpc_sequence_sync_infer_client.py and
simple_grpc_sequence_stream_infer_client.py check, on the ONNX equivalents of
``simple_sequence`` and ``simple_dyna_sequence`` (scripts/sequence_onnx.py),
plus an implicit-state accumulator, a python sequence model, the refusals in
Triton's words, statistics, and a version swap mid-sequence.

One daemon serves the module (poll mode, so the swap test can drop a version
in); every test uses its own sequence IDs."""

from __future__ import annotations

import json
import queue
import urllib.error
import urllib.request
import uuid
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import wait_for
from scripts.sequence_onnx import main as build_sequence_models
from sequence_models import sequence_py_source, write_sequence_py

VALUES = [11, 7, 5, 3, 2, 0, 1]
"""The examples' values: sequence 0 sends [0] + VALUES, sequence 1 [100] + negated."""
STREAM_TIMEOUT_S = 30


pytestmark = pytest.mark.daemon_flags(
    "--model-control-mode", "poll", "--repository-poll-secs", "0.2"
)


@pytest.fixture(scope="module")
def repository(repository):
    assert build_sequence_models([str(repository)]) == 0
    write_sequence_py(repository)
    write_sequence_py(repository, "sequence_swap")
    write_sequence_py(repository, "sequence_backlog")
    return repository


@pytest.fixture
def http(http_client):
    return http_client


@pytest.fixture
def grpc(grpc_client):
    return grpc_client


def _inputs(module, value: int, batch_size: int = 1):
    data = np.full((batch_size, 1), value, dtype=np.int32)
    tensor = module.InferInput("INPUT", list(data.shape), "INT32")
    tensor.set_data_from_numpy(data)
    return [tensor]


def _module(client):
    return grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient


def send(client, model: str, value: int, sequence_id, start=False, end=False, **kwargs):
    """One request of a sequence, as the examples' sync_send sends it."""
    module = _module(client)
    return client.infer(
        model,
        _inputs(module, value, kwargs.pop("batch_size", 1)),
        outputs=[module.InferRequestedOutput("OUTPUT")],
        sequence_id=sequence_id,
        sequence_start=start,
        sequence_end=end,
        **kwargs,
    )


def sync_interleaved(client, model: str, sequences: dict) -> dict:
    """Each sequence id -> its OUTPUT values; the sequences' requests sent
    one after another in turn, first START, last END, as the examples do."""
    results = {sequence_id: [] for sequence_id in sequences}
    length = len(next(iter(sequences.values())))
    for i in range(length):
        for sequence_id, values in sequences.items():
            answer = send(client, model, values[i], sequence_id, i == 0, i == length - 1)
            results[sequence_id].append(int(answer.as_numpy("OUTPUT")[0][0]))
    return results


def stream_interleaved(daemon, model: str, sequences: dict) -> dict:
    """The same over one gRPC stream: every request sent with
    async_stream_infer before any answer is read, answers told apart by
    request id ``<sequence id>_<count>``."""
    answers: queue.Queue = queue.Queue()

    def callback(sink, result, error):
        sink.put(error if error else result)

    length = len(next(iter(sequences.values())))
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        client.start_stream(callback=partial(callback, answers))
        for i in range(length):
            for sequence_id, values in sequences.items():
                client.async_stream_infer(
                    model,
                    _inputs(grpcclient, values[i]),
                    outputs=[grpcclient.InferRequestedOutput("OUTPUT")],
                    request_id=f"{sequence_id}_{i + 1}",
                    sequence_id=sequence_id,
                    sequence_start=i == 0,
                    sequence_end=i == length - 1,
                )
        received = [answers.get(timeout=STREAM_TIMEOUT_S) for _ in range(length * len(sequences))]
        client.stop_stream()
    errors = [item for item in received if isinstance(item, InferenceServerException)]
    assert not errors, errors
    results: dict = {sequence_id: {} for sequence_id in sequences}
    for item in received:
        sequence_id, count = item.get_response().id.rsplit("_", 1)
        key = next(k for k in sequences if str(k) == sequence_id)
        results[key][int(count)] = int(item.as_numpy("OUTPUT")[0][0])
    return {key: [found[c] for c in sorted(found)] for key, found in results.items()}


def expected(values: list[int], sequence_id: int, dyna: bool) -> list[int]:
    """OUTPUT = INPUT + START (+ END * CORRID for the dyna model): what the
    examples expect of simple_sequence / simple_dyna_sequence."""
    answers = [value for value in values]
    answers[0] += 1
    if dyna:
        answers[-1] += sequence_id
    return answers


def example_sequences(dyna: bool, offset: int) -> dict:
    """The examples' three sequences: integer IDs 1000+ and 1001+, and a
    string ID (decimal for the dyna model, which has a CORRID control; a
    uuid4 for simple_sequence, which has none)."""
    string_id = str(1002 + offset) if dyna else str(uuid.uuid4())
    return {
        1000 + offset: [0, *VALUES],
        1001 + offset: [100] + [-v for v in VALUES],
        string_id: [20] + [-v for v in VALUES],
    }


def check_example(results: dict, sequences: dict, dyna: bool) -> None:
    for sequence_id, values in sequences.items():
        corrid = int(sequence_id) if dyna else 0
        assert results[sequence_id] == expected(values, corrid, dyna), sequence_id


@pytest.mark.parametrize("dyna", [False, True], ids=["simple_sequence", "simple_dyna_sequence"])
@pytest.mark.parametrize("transport", ["http", "grpc", "grpc_stream"])
def test_the_examples_sequences_answer_as_the_examples_expect(daemon, transport, dyna):
    model = "simple_dyna_sequence" if dyna else "simple_sequence"
    offset = {"http": 0, "grpc": 10, "grpc_stream": 20}[transport] + (100 if dyna else 0)
    sequences = example_sequences(dyna, offset)
    if transport == "grpc_stream":
        results = stream_interleaved(daemon, model, sequences)
    else:
        module = httpclient if transport == "http" else grpcclient
        url = daemon.url if transport == "http" else daemon.grpc_url
        client = module.InferenceServerClient(url)
        try:
            results = sync_interleaved(client, model, sequences)
        finally:
            client.close()
    check_example(results, sequences, dyna)


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_the_implicit_state_accumulates_per_sequence_and_start_resets_it(daemon, transport):
    module = httpclient if transport == "http" else grpcclient
    client = module.InferenceServerClient(daemon.url if transport == "http" else daemon.grpc_url)
    model = "sequence_implicit_accumulator"
    base = 3000 if transport == "http" else 3100
    try:
        sums = sync_interleaved(client, model, {base: [1, 2, 3, 4], base + 1: [10, 20, 30, 40]})
        assert sums == {base: [1, 3, 6, 10], base + 1: [10, 30, 60, 100]}
        first = send(client, model, 5, base + 2, start=True).as_numpy("OUTPUT")
        again = send(client, model, 7, base + 2, start=True).as_numpy("OUTPUT")
        last = send(client, model, 1, base + 2, end=True).as_numpy("OUTPUT")
        assert [int(first[0][0]), int(again[0][0]), int(last[0][0])] == [5, 7, 8]
    finally:
        client.close()


def test_the_python_model_sees_the_controls_the_id_and_the_flags(http):
    infos, outputs = [], []
    for i, value in enumerate([4, 5, 6]):
        answer = http.infer(
            "sequence_py",
            _inputs(httpclient, value),
            sequence_id=4000,
            sequence_start=i == 0,
            sequence_end=i == 2,
        )
        outputs.append(int(answer.as_numpy("OUTPUT")[0][0]))
        infos.append(json.loads(answer.as_numpy("INFO")[0][0]))
    assert outputs == [5, 5, 6 + 4000]
    assert [info["flags"] for info in infos] == [1, 0, 2]
    assert {info["correlation_id"] for info in infos} == {4000}
    assert all(info["ready"] == [[1]] and info["corrid"] == [[4000]] for info in infos)
    assert {info["corrid_dtype"] for info in infos} == {"uint64"}
    assert {tuple(info["start_shape"]) for info in infos} == {(1, 1)}

    answer = http.infer(
        "sequence_py",
        _inputs(httpclient, 1),
        sequence_id="4001",
        sequence_start=True,
        sequence_end=True,
    )
    info = json.loads(answer.as_numpy("INFO")[0][0])
    assert (info["correlation_id"], info["flags"], info["corrid"]) == ("4001", 3, [[4001]])
    assert int(answer.as_numpy("OUTPUT")[0][0]) == 1 + 1 + 4001


NO_ID = "inference request to model '{model}' must specify a non-zero or non-empty correlation ID"
NO_START = (
    "inference request for sequence {id} to model '{model}' must specify the START flag on "
    "the first request of the sequence"
)
BATCH = (
    "inference request to model '{model}' must specify batch-size 1 due to requirements of "
    "sequence batcher"
)
NOT_DECIMAL = (
    "inference request for sequence {id} to model '{model}': the model's CORRID control input "
    "'CORRID' is UINT64, so a string sequence_id must be a decimal number"
)


def refusal(client, model: str, value: int, sequence_id, **kwargs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as raised:
        send(client, model, value, sequence_id, **kwargs)
    return raised.value


def refusals(client, base: int) -> dict:
    """Case -> (status, message) of each refusal the sequence batcher gives."""
    model, dyna = "simple_sequence", "simple_dyna_sequence"
    cases = {
        "no id": (model, NO_ID.format(model=model), dict(sequence_id=0, start=True)),
        "no start": (model, NO_START.format(id=base, model=model), dict(sequence_id=base)),
        "batch of 2": (
            model,
            BATCH.format(model=model),
            dict(sequence_id=base + 1, start=True, batch_size=2),
        ),
        "not decimal": (
            dyna,
            NOT_DECIMAL.format(id="seq-a", model=dyna),
            dict(sequence_id="seq-a", start=True),
        ),
    }
    found = {}
    for case, (name, message, kwargs) in cases.items():
        error = refusal(client, name, 1, kwargs.pop("sequence_id"), **kwargs)
        found[case] = (error.status(), error.message(), message)
    return found


def test_http_refuses_with_400_and_tritons_words(http):
    for case, (status, message, wanted) in refusals(http, 5000).items():
        assert (status, message) == ("400", wanted), case


def test_grpc_refuses_with_invalid_argument_and_tritons_words(grpc):
    for case, (status, message, wanted) in refusals(grpc, 5100).items():
        assert (status, message) == ("StatusCode.INVALID_ARGUMENT", wanted), case


def test_a_request_after_end_must_start_again(http):
    send(http, "simple_sequence", 1, 5200, start=True, end=True)
    error = refusal(http, "simple_sequence", 1, 5200)
    assert error.message() == NO_START.format(id=5200, model="simple_sequence")


def _inference_stats(client, model: str) -> dict:
    stats = client.get_inference_statistics(model)["model_stats"][0]
    return {
        "inference_count": int(stats.get("inference_count", 0)),
        "execution_count": int(stats.get("execution_count", 0)),
        "success": int(stats["inference_stats"]["success"].get("count", 0)),
        "fail": int(stats["inference_stats"]["fail"].get("count", 0)),
    }


def test_statistics_count_real_requests_only_and_refusals_are_not_failures(http):
    """simple_sequence is direct: a request in slot 1 alone runs with a null
    request padding slot 0; the padding is not counted."""
    before = _inference_stats(http, "simple_sequence")
    results = sync_interleaved(http, "simple_sequence", {6000: [1, 2, 3], 6001: [4, 5, 6]})
    assert results == {6000: [2, 2, 3], 6001: [5, 5, 6]}
    refusal(http, "simple_sequence", 1, 6002)
    refusal(http, "simple_sequence", 1, 0, start=True)
    after = _inference_stats(http, "simple_sequence")
    assert after["inference_count"] - before["inference_count"] == 6
    assert after["success"] - before["success"] == 6
    assert after["fail"] == before["fail"]
    assert 1 <= after["execution_count"] - before["execution_count"] <= 6


def test_a_version_swap_mid_sequence_refuses_the_next_request_until_start(daemon, http):
    """The sequence started on version 1 does not carry over to version 2:
    its next request is refused with the START text (the new version's
    batcher never saw it), a new START runs on version 2; nothing hangs."""
    model = "sequence_swap"
    first = send(http, model, 1, 7000, start=True)
    assert (first.get_response()["model_version"], int(first.as_numpy("OUTPUT")[0][0])) == (
        "1",
        2,
    )
    model_dir = daemon.repository / model
    staging = model_dir / ".2.partial"
    staging.mkdir()
    (staging / "model.py").write_text(sequence_py_source(offset=100))
    staging.rename(model_dir / "2")
    wait_for(lambda: http.get_model_metadata(model)["versions"] == ["2"], what="version 2 to serve")
    error = refusal(http, model, 3, 7000, end=True)
    assert (error.status(), error.message()) == ("400", NO_START.format(id=7000, model=model))
    again = send(http, model, 3, 7000, start=True, end=True)
    assert (again.get_response()["model_version"], int(again.as_numpy("OUTPUT")[0][0])) == (
        "2",
        3 + 1 + 7000 + 100,
    )


@pytest.mark.parametrize(
    "model", ["simple_sequence", "simple_dyna_sequence", "sequence_implicit_accumulator"]
)
def test_more_sequences_than_slots_wait_their_turn_on_one_stream(daemon, model):
    """12 sequences at once, more than the 8 direct slots or 4 oldest
    candidates: the ones without a slot wait in the backlog and every answer
    is still its own sequence's."""
    base = {"simple_sequence": 8000, "simple_dyna_sequence": 8100}.get(model, 8200)
    sequences = {base + n: [n, n + 1, n + 2, n + 3] for n in range(12)}
    results = stream_interleaved(daemon, model, sequences)
    for sequence_id, values in sequences.items():
        if model == "sequence_implicit_accumulator":
            assert results[sequence_id] == list(np.cumsum(values)), sequence_id
        else:
            dyna = model == "simple_dyna_sequence"
            assert results[sequence_id] == expected(values, sequence_id, dyna), sequence_id


def test_a_stream_refusal_reaches_the_callback_and_the_stream_goes_on(daemon):
    answers: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put(error or result))
        for request_id, kwargs in (
            ("refused", dict(sequence_id=8300)),
            ("started", dict(sequence_id=8300, sequence_start=True)),
            ("ended", dict(sequence_id=8300, sequence_end=True)),
        ):
            client.async_stream_infer(
                "simple_sequence", _inputs(grpcclient, 5), request_id=request_id, **kwargs
            )
        received = [answers.get(timeout=STREAM_TIMEOUT_S) for _ in range(3)]
        client.stop_stream()
    errors = [item for item in received if isinstance(item, InferenceServerException)]
    assert [error.message() for error in errors] == [
        NO_START.format(id=8300, model="simple_sequence")
    ]
    results = {
        item.get_response().id: int(item.as_numpy("OUTPUT")[0][0])
        for item in received
        if not isinstance(item, InferenceServerException)
    }
    assert results == {"started": 6, "ended": 5}


def test_a_negative_http_sequence_id_is_refused_with_400(daemon):
    """Triton 2.51 answers 500 'Unable to parse'; a client mistake is a 400 here."""
    body = json.dumps(
        {
            "parameters": {"sequence_id": -3, "sequence_start": True},
            "inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [1]}],
        }
    ).encode()
    request = urllib.request.Request(
        f"http://{daemon.url}/v2/models/simple_sequence/infer", data=body, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=30)
    assert raised.value.code == 400
    assert json.loads(raised.value.read())["error"] == (
        "inference request to model 'simple_sequence': parameter 'sequence_id' must be an "
        "unsigned 64-bit integer, got -3"
    )


def test_a_version_swap_answers_the_request_waiting_in_the_backlog(daemon, grpc):
    """sequence_backlog takes 4 sequences (oldest, max_candidate_sequences
    4): a fifth START waits for a slot; the swap does not leave it hanging:
    version 1, retiring, finishes its in-flight requests, so the waiting
    START runs there once an idle sequence frees a slot (5 s idle here)."""
    model = "sequence_backlog"
    for sequence_id in range(9000, 9004):
        send(grpc, model, 1, sequence_id, start=True)
    answers: queue.Queue = queue.Queue()
    grpc.async_infer(
        model,
        _inputs(grpcclient, 1),
        partial(lambda sink, result, error: sink.put(error or result), answers),
        sequence_id=9004,
        sequence_start=True,
    )
    with pytest.raises(queue.Empty):
        answers.get(timeout=0.3)
    model_dir = daemon.repository / model
    staging = model_dir / ".2.partial"
    staging.mkdir()
    (staging / "model.py").write_text(sequence_py_source(offset=100))
    staging.rename(model_dir / "2")
    waited = answers.get(timeout=STREAM_TIMEOUT_S)
    assert not isinstance(waited, InferenceServerException), waited
    assert (waited.get_response().model_version, int(waited.as_numpy("OUTPUT")[0][0])) == (
        "1",
        2,
    )
    wait_for(lambda: grpc.get_model_metadata(model).versions == ["2"], what="version 2 to serve")
