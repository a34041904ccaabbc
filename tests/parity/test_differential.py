"""The same requests to a real Triton 2.51 and to edgebox, answers compared:
status codes, accept/reject, and the bodies that clients read. Differences
edgebox keeps on purpose are listed in ``DELIBERATE`` with their reason;
anything else fails, with every difference in one message."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

ONES = [1.0] * 16
ARANGE = [float(i) for i in range(16)]


def infer_body(inputs: list[dict], outputs: list[dict] | None = None) -> bytes:
    body: dict = {"inputs": inputs}
    if outputs is not None:
        body["outputs"] = outputs
    return json.dumps(body).encode()


def tensor(name: str, data: list, shape=(1, 16), datatype: str = "FP32") -> dict:
    return {"name": name, "shape": list(shape), "datatype": datatype, "data": data}


VALID = infer_body([tensor("INPUT0", ARANGE), tensor("INPUT1", ONES)])
CASES = {
    "server live": ("GET", "/v2/health/live", None),
    "server ready": ("GET", "/v2/health/ready", None),
    "model ready": ("GET", "/v2/models/add_sub_py/ready", None),
    "ensemble ready": ("GET", "/v2/models/double/ready", None),
    "unknown model ready": ("GET", "/v2/models/nope/ready", None),
    "unknown version ready": ("GET", "/v2/models/add_sub_py/versions/9/ready", None),
    "model metadata": ("GET", "/v2/models/add_sub_py", None),
    "unknown model metadata": ("GET", "/v2/models/nope", None),
    "model config": ("GET", "/v2/models/add_sub_py/config", None),
    "infer": ("POST", "/v2/models/add_sub_py/infer", VALID),
    "infer ensemble": (
        "POST",
        "/v2/models/double/infer",
        infer_body([tensor("IN", ARANGE)]),
    ),
    "infer unknown model": ("POST", "/v2/models/nope/infer", VALID),
    "infer unknown version": ("POST", "/v2/models/add_sub_py/versions/9/infer", VALID),
    "infer missing input": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", ARANGE)]),
    ),
    "infer unknown input": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", ARANGE), tensor("INPUT9", ONES)]),
    ),
    "infer duplicate input": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", ARANGE), tensor("INPUT0", ONES), tensor("INPUT1", ONES)]),
    ),
    "infer wrong datatype": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", [1] * 16, datatype="INT32"), tensor("INPUT1", ONES)]),
    ),
    "infer wrong shape": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", ONES[:8], (1, 8)), tensor("INPUT1", ONES[:8], (1, 8))]),
    ),
    "infer batch of zero": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", [], (0, 16)), tensor("INPUT1", [], (0, 16))]),
    ),
    "infer batch over max": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", ONES * 9, (9, 16)), tensor("INPUT1", ONES * 9, (9, 16))]),
    ),
    "infer unknown output": (
        "POST",
        "/v2/models/add_sub_py/infer",
        infer_body([tensor("INPUT0", ARANGE), tensor("INPUT1", ONES)], [{"name": "OUTPUT9"}]),
    ),
    "infer malformed JSON": ("POST", "/v2/models/add_sub_py/infer", b'{"inputs": ['),
    "repository index": ("POST", "/v2/repository/index", b"{}"),
    "unload without model control": ("POST", "/v2/repository/models/add_sub_py/unload", b"{}"),
    "statistics": ("GET", "/v2/models/add_sub_py/stats", None),
}


def sequence_body(value: int = 1, batch_size: int = 1, **parameters) -> bytes:
    body = json.loads(infer_body([tensor("INPUT", [value] * batch_size, (batch_size, 1), "INT32")]))
    if parameters:
        body["parameters"] = parameters
    return json.dumps(body).encode()


SEQUENCE = "/v2/models/sequence_py/infer"
DIRECT = "/v2/models/sequence_py_direct/infer"
CASES |= {
    "sequence config": ("GET", "/v2/models/sequence_py/config", None),
    "sequence config defaults": ("GET", "/v2/models/sequence_py_defaults/config", None),
    "sequence infer no id": ("POST", SEQUENCE, sequence_body(sequence_start=True)),
    "sequence infer id 0": ("POST", SEQUENCE, sequence_body(sequence_id=0, sequence_start=True)),
    "sequence infer no start": ("POST", SEQUENCE, sequence_body(sequence_id=11)),
    "sequence infer end without start": (
        "POST",
        SEQUENCE,
        sequence_body(sequence_id=11, sequence_end=True),
    ),
    "sequence infer start": (
        "POST",
        SEQUENCE,
        sequence_body(3, sequence_id=12, sequence_start=True),
    ),
    "sequence infer middle": ("POST", SEQUENCE, sequence_body(4, sequence_id=12)),
    "sequence infer start again": (
        "POST",
        SEQUENCE,
        sequence_body(5, sequence_id=12, sequence_start=True),
    ),
    "sequence infer end": ("POST", SEQUENCE, sequence_body(6, sequence_id=12, sequence_end=True)),
    "sequence infer after end": ("POST", SEQUENCE, sequence_body(7, sequence_id=12)),
    "sequence infer start and end": (
        "POST",
        SEQUENCE,
        sequence_body(8, sequence_id=13, sequence_start=True, sequence_end=True),
    ),
    "sequence infer batch of 2": (
        "POST",
        SEQUENCE,
        sequence_body(1, 2, sequence_id=14, sequence_start=True),
    ),
    "sequence infer negative id": (
        "POST",
        SEQUENCE,
        sequence_body(sequence_id=-3, sequence_start=True),
    ),
    "sequence infer string CORRID": (
        "POST",
        "/v2/models/sequence_py_strid/infer",
        sequence_body(2, sequence_id="15", sequence_start=True, sequence_end=True),
    ),
    "sequence infer decimal string id": (
        "POST",
        SEQUENCE,
        sequence_body(2, sequence_id="16", sequence_start=True, sequence_end=True),
    ),
    "sequence statistics": ("GET", "/v2/models/sequence_py/stats", None),
    "sequence direct slot 0": (
        "POST",
        DIRECT,
        sequence_body(1, sequence_id=21, sequence_start=True),
    ),
    "sequence direct slot 1": (
        "POST",
        DIRECT,
        sequence_body(2, sequence_id=22, sequence_start=True),
    ),
    "sequence direct slot 1 alone": ("POST", DIRECT, sequence_body(3, sequence_id=22)),
    "sequence direct slot 1 end": (
        "POST",
        DIRECT,
        sequence_body(4, sequence_id=22, sequence_end=True),
    ),
    "sequence direct statistics": ("GET", "/v2/models/sequence_py_direct/stats", None),
}

ANSWERS_ERROR = "/v2/models/answers_error/infer"
CASES |= {
    "error infer answered": (
        "POST",
        ANSWERS_ERROR,
        infer_body([tensor("IN", [1], (1,), "INT32")]),
    ),
    "error infer error response": (
        "POST",
        ANSWERS_ERROR,
        infer_body([tensor("IN", [-1], (1,), "INT32")]),
    ),
    "error infer raised": ("POST", ANSWERS_ERROR, infer_body([tensor("IN", [-5], (1,), "INT32")])),
    "error statistics": ("GET", "/v2/models/answers_error/stats", None),
}

DELIBERATE = {
    "infer malformed JSON": "both refuse it; edgebox's status is 400 where Triton's may differ",
    "sequence infer negative id": (
        "Triton answers a client's negative sequence_id with 500 'Unable to parse'; a client "
        "mistake is a 400 in edgebox"
    ),
    "sequence infer string CORRID": (
        "Triton 2.51 fails a TYPE_STRING CORRID ('unexpected number of string elements'); "
        "edgebox hands the model the ID as its text"
    ),
    "sequence infer decimal string id": (
        "Triton 2.51 hands an integer CORRID the string's bytes read as a number (and "
        "correlation_id() the string); edgebox gives the decimal value"
    ),
}
"""Case -> why edgebox answers differently on purpose (issue 13 lists them)."""


def call(url: str, method: str, path: str, body: bytes | None) -> tuple[int, object]:
    request = urllib.request.Request(f"http://{url}{path}", data=body, method=method)
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            status, raw = reply.status, reply.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode("utf-8", "replace")


def comparable(case: str, status: int, body: object) -> object:
    """What a client reads from the answer: the status, and for successes the
    parts clients use."""
    if case.startswith("sequence") and status >= 400:
        return status, body.get("error") if isinstance(body, dict) else body
    if status >= 400 or not isinstance(body, (dict, list)):
        return status
    if case.startswith(("infer", "sequence infer", "sequence direct slot", "error infer")):
        return status, {o["name"]: o["data"] for o in body.get("outputs", [])}
    if case == "model metadata":
        return status, {
            k: body.get(k) for k in ("name", "versions", "platform", "inputs", "outputs")
        }
    if case == "repository index":
        return status, sorted((e["name"], e.get("version"), e.get("state")) for e in body)
    if case.startswith("sequence config"):
        return status, body
    if case in ("sequence statistics", "sequence direct statistics", "error statistics"):
        stats = body["model_stats"][0]
        inference = stats["inference_stats"]
        return status, {
            "success": inference["success"]["count"],
            "fail": inference["fail"]["count"],
            "inference_count": stats["inference_count"],
            "execution_count": stats["execution_count"],
            "queue": inference["queue"]["count"],
            "compute_infer": inference["compute_infer"]["count"],
        }
    if case == "statistics":
        stats = body["model_stats"][0]
        inference = stats["inference_stats"]
        return status, (inference["success"]["count"], inference["fail"]["count"])
    return status


@pytest.fixture(scope="module")
def answers(triton, edgebox) -> dict[str, tuple[object, object]]:
    """Case -> (Triton's comparable answer, edgebox's), the requests sent in
    the same order to both."""
    found = {}
    for case, (method, path, body) in CASES.items():
        found[case] = tuple(
            comparable(case, *call(url, method, path, body)) for url in (triton, edgebox)
        )
    return found


def test_edgebox_answers_as_triton_does(answers):
    differences = [
        f"{case}: Triton {theirs!r}, edgebox {ours!r}"
        for case, (theirs, ours) in answers.items()
        if theirs != ours and case not in DELIBERATE
    ]
    assert not differences, "\n".join(differences)


def test_the_deliberate_differences_are_still_differences(answers):
    """A listed difference that no longer differs comes off the list."""
    same = [case for case in DELIBERATE if answers[case][0] == answers[case][1]]
    assert not same, f"no longer different, remove from DELIBERATE: {same}"
