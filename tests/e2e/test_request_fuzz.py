"""A seeded fuzzer against the real daemon, as a hostile client on the LAN
would probe it: mutated v2 requests (JSON and binary), hostile shapes and
encodings, random routes and methods, and byte-level damage to the HTTP framing.

Whatever it sends, the answer is a client error (never a 5xx), every error
body is a JSON ``{"error": ...}``, and afterwards the daemon still answers
correctly. ``EDGEBOX_FUZZ_SEED`` reproduces a run; a failure names the seed and
the case."""

from __future__ import annotations

import collections
import gzip
import http.client
import json
import os
import random
import shutil
import socket

import numpy as np
import pytest
import tritonclient.http as httpclient

from daemon_process import explicit_control
from model_fixtures import add_sub_infer_inputs, copy_demo_repository

SEED = int(os.environ.get("EDGEBOX_FUZZ_SEED", "20261125"))
CASES = int(os.environ.get("EDGEBOX_FUZZ_CASES", "30000"))
MODELS = ("add_sub", "multiply", "square_diff")
DATATYPES = ("FP32", "FP16", "INT64", "INT8", "UINT8", "BOOL", "BYTES", "BF16", "FP64", "XX", "")
MAX_REQUEST_BYTES = 1 << 20
GZIP_BOMB = gzip.compress(b"[" * (2 * MAX_REQUEST_BYTES))
INPUTS = {"add_sub": ("INPUT0", "INPUT1"), "multiply": ("A", "B"), "square_diff": ("A", "B")}


pytestmark = pytest.mark.daemon_flags(
    *explicit_control("*"),
    *("--max-request-bytes", str(MAX_REQUEST_BYTES)),
    *("--http-restricted-api", "statistics:fuzz-key=not-sent"),
)


@pytest.fixture(scope="module")
def repository(repository):
    copy_demo_repository(repository)
    for folder in ("lane_pipeline", "lane_preprocess", "lane_postprocess", "lane_detector"):
        # The lane models cost seconds to load and add nothing a fuzzer needs.
        shutil.rmtree(repository / folder)
    return repository


def _valid_request(rng: random.Random, model: str) -> dict:
    batch = rng.randint(1, 3)
    return {
        "id": str(rng.randint(0, 99)),
        "inputs": [
            {
                "name": name,
                "datatype": "FP32",
                "shape": [batch, 16],
                "data": [rng.random() for _ in range(batch * 16)],
            }
            for name in INPUTS[model]
        ],
    }


def _hostile_value(rng: random.Random):
    return rng.choice(
        [
            None,
            -1,
            0,
            2**63,
            2**64 + 1,
            -(2**63) - 1,
            1.5,
            "1",
            "\ud800",
            [],
            {},
            [[[[[]]]]],
            True,
            [2**62, 2**62],
            [0, 2**63],
            [2**40],
            [1] * rng.randint(60, 200),
            [rng.randint(0, 2**31) for _ in range(rng.randint(1, 40))],
            "nan",
        ]
    )


def _mutate_json(rng: random.Random, document: dict) -> dict:
    """One to three edits at random places: replace, delete or duplicate."""
    for _ in range(rng.randint(1, 3)):
        target = rng.choice(document["inputs"]) if document["inputs"] else document
        choice = rng.randrange(9)
        if choice == 0:
            target["shape"] = _hostile_value(rng)
        elif choice == 1:
            target["datatype"] = rng.choice(DATATYPES)
        elif choice == 2:
            target["data"] = _hostile_value(rng)
        elif choice == 3 and target:
            target.pop(rng.choice(list(target)))
        elif choice == 4:
            document["inputs"].append(
                json.loads(json.dumps(rng.choice(document["inputs"] or [{}])))
            )
        elif choice == 5:
            target["parameters"] = rng.choice(
                [{"binary_data_size": _hostile_value(rng)}, {"shared_memory_region": "x"}, "p", {}]
            )
        elif choice == 6:
            document["outputs"] = rng.choice(
                [
                    [{"name": "OUTPUT0", "parameters": {"classification": _hostile_value(rng)}}],
                    [{"name": _hostile_value(rng)}],
                    "x",
                    [{"name": "OUTPUT0"}, {"name": "OUTPUT0"}],
                ]
            )
        elif choice == 7:
            document["parameters"] = _hostile_value(rng)
        else:
            target["name"] = _hostile_value(rng)
    return document


def _deep_json(rng: random.Random) -> bytes:
    depth = rng.randint(1000, 100_000)
    return b'{"inputs":' + b"[" * depth + b"]" * depth + b"}"


def _binary_request(rng: random.Random, model: str) -> tuple[bytes, dict]:
    data = np.arange(16, dtype=np.float32).tobytes()
    inputs = [
        {"name": name, "datatype": "FP32", "shape": [1, 16], "parameters": {"binary_data_size": 64}}
        for name in INPUTS[model]
    ]
    if rng.random() < 0.7:
        _mutate_json(rng, {"inputs": inputs})
    header = json.dumps({"inputs": inputs}, default=str).encode()
    body = header + data * rng.randint(0, 3)
    length = rng.choice([len(header), len(header), 0, len(body) + 5, -1, "x", 2**70])
    return body, {"Inference-Header-Content-Length": str(length)}


def _case(rng: random.Random) -> tuple[str, str, bytes, dict]:
    model = rng.choice(MODELS)
    kind = rng.randrange(10)
    path = f"/v2/models/{model}/infer"
    headers = {"Content-Type": "application/json"}
    if kind <= 3:
        body = json.dumps(_mutate_json(rng, _valid_request(rng, model)), default=str).encode()
        return "POST", path, body, headers
    if kind == 4:
        body, extra = _binary_request(rng, model)
        return "POST", path, body, headers | extra
    if kind == 5:
        return "POST", path, _deep_json(rng), headers
    if kind == 6:
        valid = json.dumps(_valid_request(rng, model)).encode()
        damaged = rng.choice(
            [gzip.compress(valid)[:-8], b"\x1f\x8b" + rng.randbytes(40), valid, GZIP_BOMB]
        )
        encoding = rng.choice(["gzip", "deflate", "br", "gzip, gzip"])
        return "POST", path, damaged, headers | {"Content-Encoding": encoding}
    if kind == 7:
        segment = rng.choice(["..", "%2e%2e", "+1", "01", "1_0", "-1", "1" * 30, "%00", "a%2Fb"])
        path = rng.choice(
            [
                f"/v2/models/{model}/versions/{segment}/infer",
                f"/v2/models/{segment}/config",
                f"/v2/models/{segment}",
                f"/v2/models/{model}/versions/{segment}/stats",
            ]
        )
        return rng.choice(["GET", "POST", "HEAD"]), path, b"{}", headers
    if kind == 8:
        body = rng.choice(
            [b"", b"{", b"[]", b'{"parameters": 5}', _deep_json(rng), rng.randbytes(64)]
        )
        target = rng.choice(["absent_model", "%2e%2e", "a%20b", "x" * 300])
        route = rng.choice(["load", "unload"])
        return "POST", f"/v2/repository/models/{target}/{route}", body, headers
    method = rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
    path = rng.choice(
        [
            "/v2",
            "/v2/health/ready",
            "/v2/models/stats",
            "/v2/repository/index",
            path,
            f"/v2/models/{model}/generate",
            f"/v2/models/{model}/generate_stream",
            "/v2/systemsharedmemory/region/fuzz/register",
            "/v2/systemsharedmemory/status",
            "/v2/cudasharedmemory/region/fuzz/register",
            "/v2/logging",
            "/v2/trace/setting",
        ]
    )
    body = rng.choice(
        [
            rng.randbytes(rng.randint(0, 64)),
            _deep_json(rng),
            json.dumps(
                {
                    rng.choice(["key", "log_file", "trace_level", "INPUT0", "byte_size"]): (
                        _hostile_value(rng)
                    ),
                    "offset": _hostile_value(rng),
                    "byte_size": _hostile_value(rng),
                },
                default=str,
            ).encode(),
        ]
    )
    return method, path + rng.choice(["", "?x=1", "/", "//"]), body, {}


def _check_answer(status: int, body: bytes, where: str) -> None:
    assert status < 500, f"{where}: answered {status} {body[:300]!r}"
    if status >= 400 and body:
        document = json.loads(body)
        assert isinstance(document.get("error"), str), f"{where}: error body {body[:300]!r}"


def _send(connection: http.client.HTTPConnection, case) -> tuple[int, bytes]:
    method, path, body, headers = case
    connection.request(method, path, body=body, headers=headers)
    reply = connection.getresponse()
    data = reply.read()
    if reply.getheader("Connection", "").lower() == "close":
        connection.close()
    return reply.status, data


def _framing_damage(rng: random.Random, port: int) -> tuple[int, bytes] | None:
    """A valid request with bytes flipped, cut or repeated, sent raw; the
    write side is shut so a cut request ends at EOF rather than a timeout."""
    body = json.dumps(_valid_request(rng, "add_sub")).encode()
    raw = bytearray(
        b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(raw))
        action = rng.randrange(3)
        if action == 0:
            raw[at] = rng.randrange(256)
        elif action == 1:
            del raw[at:]
            if not raw:
                raw += b"G"
        else:
            raw[at:at] = raw[at : at + rng.randint(1, 50)]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    if not received:
        return None
    head, _, rest = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        len(rest),
    )
    return status, rest[:length]


def test_fuzzed_requests_get_json_client_errors_and_the_daemon_keeps_answering(daemon):
    rng = random.Random(SEED)
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    failures: list[str] = []
    statuses: collections.Counter[int] = collections.Counter()
    for index in range(CASES):
        where = f"seed {SEED} case {index}"
        try:
            if rng.random() < 0.15:
                answer = _framing_damage(rng, daemon.port)
                if answer is not None:
                    _check_answer(*answer, f"{where} (damaged framing)")
                continue
            case = _case(rng)
            where = f"{where}: {case[0]} {case[1][:80]}"
            try:
                status, body = _send(connection, case)
            except (ConnectionError, http.client.HTTPException) as exc:
                connection.close()
                raise AssertionError(f"{where}: got no answer: {exc!r}") from None
            statuses[status] += 1
            _check_answer(status, body, where)
        except (AssertionError, ValueError) as failure:
            failures.append(str(failure).splitlines()[0])
    connection.close()
    assert not failures, f"{len(failures)} of {CASES} cases failed:\n" + "\n".join(failures[:30])
    # A fuzzer whose cases all fail the same early check would prove nothing.
    assert {200, 400, 403, 404, 405, 413} <= set(statuses), statuses

    client = httpclient.InferenceServerClient(daemon.url)
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 2, dtype=np.float32)
    inputs = add_sub_infer_inputs(httpclient, a, b)
    result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert "Traceback" not in daemon.log()


def test_fuzz_cases_are_reproducible_from_the_seed():
    def cases() -> list:
        rng = random.Random(SEED)
        return [_case(rng) for _ in range(50)]

    assert cases() == cases()
