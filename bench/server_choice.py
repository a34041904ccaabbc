"""Why edgebox serves HTTP from its own thread-per-connection server: the same
``add_sub`` ONNX session behind three servers, one request at a time, in
interleaved rounds, each measured through ``tritonclient.http`` and through
the minimal bare-socket client (whose small cost leaves the server's own
visible).

* ``uvicorn+thread``: uvicorn with uvloop and httptools, a raw ASGI app that
  reads the binary body and runs the session on a worker thread
  (``run_in_executor``), so inference never blocks the event loop. This is the
  asyncio design a production server would use.
* ``uvicorn inline``: the same app running the session on the event loop. It
  stalls every other connection while a model runs, so it is not a valid
  design; it is shown as the lower bound of what uvicorn itself costs.
* ``edgebox``: the real daemon.

The ASGI app speaks just enough of the KServe v2 binary-tensor extension for
the bench's request: FP32 inputs sent as binary, every output returned binary.
Run alone with ``python bench/run.py --server-choice-only``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import multiprocessing
import socket
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from bench.latency import Round
from bench.load import MinimalHttpLoad, TritonLoad
from bench.workload import Workload

CANDIDATES = ("uvicorn+thread", "uvicorn inline", "edgebox")


def make_app(model_path: str, inline: bool):
    """A raw ASGI app serving one ONNX model at ``/v2/models/{name}/infer``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model_path, sess_options=options, providers=["CPUExecutionProvider"]
    )
    output_names = [o.name for o in session.get_outputs()]
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infer")

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        if scope["path"] == "/v2/health/ready":
            await _answer(send, 200, [], b"")
            return
        if scope["method"] != "POST" or not scope["path"].endswith("/infer"):
            await _answer(send, 404, [], b"")
            return
        body = b"".join(chunks)
        headers = dict(scope["headers"])
        header_length = int(headers.get(b"inference-header-content-length", len(body)))
        document = json.loads(body[:header_length])
        feeds = {}
        offset = header_length
        for item in document["inputs"]:
            size = item["parameters"]["binary_data_size"]
            array = np.frombuffer(body, dtype=np.float32, count=size // 4, offset=offset)
            feeds[item["name"]] = array.reshape(item["shape"])
            offset += size
        if inline:
            results = session.run(output_names, feeds)
        else:
            loop = asyncio.get_running_loop()
            results = await loop.run_in_executor(executor, session.run, output_names, feeds)
        outputs = [
            {
                "name": name,
                "datatype": "FP32",
                "shape": list(array.shape),
                "parameters": {"binary_data_size": array.nbytes},
            }
            for name, array in zip(output_names, results, strict=True)
        ]
        header = json.dumps(
            {"model_name": scope["path"].split("/")[3], "outputs": outputs},
            separators=(",", ":"),
        ).encode()
        await _answer(
            send,
            200,
            [
                (b"content-type", b"application/octet-stream"),
                (b"inference-header-content-length", str(len(header)).encode()),
            ],
            b"".join([header, *(np.ascontiguousarray(a).tobytes() for a in results)]),
        )

    return app


async def _answer(send, status: int, headers: list, body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _serve(model_path: str, inline: bool, report) -> None:
    """Child process: bind a free port, report it, serve until SIGTERM."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    report.send(sock.getsockname()[1])
    report.close()
    config = uvicorn.Config(
        make_app(model_path, inline),
        loop="uvloop",
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
    )
    uvicorn.Server(config).run(sockets=[sock])


class UvicornCandidate:
    """One uvicorn server in a child process."""

    def __init__(self, model_path: Path, inline: bool) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(str(model_path), inline, child), name="bench-uvicorn", daemon=True
        )
        self._process.start()
        if not parent.poll(60):
            self.close()
            raise RuntimeError("uvicorn candidate did not report its port within 60 s")
        self.url = f"127.0.0.1:{parent.recv()}"
        parent.close()

    def close(self) -> None:
        self._process.terminate()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def compare(
    workload: Workload,
    edgebox_url: str,
    rounds: int,
    duration_s: float,
    expected: dict[str, list[np.ndarray]],
    log=print,
) -> dict[tuple[str, str], list[Round]]:
    """Add_sub at concurrency 1 behind each candidate, through tritonclient
    and through the minimal client (which leaves the server's own cost
    visible): ``rounds`` interleaved rounds of ``duration_s`` per measurement,
    the order rotated every round. Returns the rounds per (candidate, client)."""
    missing = [name for name in ("uvicorn", "uvloop") if importlib.util.find_spec(name) is None]
    if missing:
        raise RuntimeError(
            f"server choice needs {', '.join(missing)}: pip install -r bench/requirements.txt"
        )
    threaded = UvicornCandidate(workload.model_path, inline=False)
    inline = UvicornCandidate(workload.model_path, inline=True)
    try:
        urls = {
            "uvicorn+thread": threaded.url,
            "uvicorn inline": inline.url,
            "edgebox": edgebox_url,
        }
        loads = {}
        for name in CANDIDATES:
            _wait_ready(urls[name])
            triton = TritonLoad(urls[name], workload)
            triton.check(expected[workload.name])
            loads[(name, "tritonclient")] = lambda s, t=triton: t.measure(1, s, 200_000)
            minimal = MinimalHttpLoad(urls[name], workload)
            loads[(name, "minimal")] = lambda s, m=minimal: m.measure(s, 200_000)
        for measure in loads.values():
            measure(min(duration_s, 0.3))
        keys = list(loads)
        measured: dict[tuple[str, str], list[Round]] = {key: [] for key in keys}
        for index in range(rounds):
            shift = index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                measured[key].append(loads[key](duration_s))
            log(
                f"  server choice round {index + 1}/{rounds} p50 us: "
                + ", ".join(f"{n} via {c} {measured[(n, c)][-1].p50_us:.0f}" for n, c in keys),
                flush=True,
            )
        return measured
    finally:
        threaded.close()
        inline.close()


def paired_ratio(rounds: list[Round], reference: list[Round]) -> float:
    """Median over rounds of this p50 / the reference's p50 in the same round."""
    return statistics.median(
        r.p50_us / ref.p50_us for r, ref in zip(rounds, reference, strict=True)
    )


def _wait_ready(url: str, timeout_s: float = 30.0) -> None:
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://{url}/v2/health/ready", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} not ready after {timeout_s} s")
        time.sleep(0.05)
