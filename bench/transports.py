"""Issue 10: what each transport costs, against the direct in-process call,
on one daemon that serves HTTP and gRPC side by side.

Both bench models (``add_sub``: all overhead; ``lane``: 2.7 MB up, 0.8 MB
back) go through each transport at concurrency 1 and 8:

* ``HTTP binary``: ``tritonclient.http``, binary tensors both ways (the
  issue 2 driver's request);
* ``gRPC``: ``tritonclient.grpc``, raw tensor contents both ways;
* ``HTTP + system shm`` and ``gRPC + system shm``: the same clients with
  every input and output in system shared memory regions the client created
  and registered (``tritonclient.utils.shared_memory``): the request names
  regions and offsets, the daemon reads inputs from and writes outputs into
  them. Each client writes its inputs into its region once, when it opens (a
  camera decoder would write each frame there itself), and leaves the outputs
  in their region (read as views). Measured only when the daemon lists
  ``system_shared_memory`` among its extensions (``GET /v2``).

Against two floors from ``bench/floors.py``, taken in the same rounds:
ONNX Runtime called on this thread (``direct``) and a loopback socket round
trip of the HTTP bodies' byte counts (``socket``).

Every cell runs once per round for its time, the order rotated by one each
round, after a short untimed pass of every cell; before that, every transport
must answer what ONNX Runtime answers. Figures are medians of per-round values;
each target is the median of a per-round ratio, so a slow spell on the shared
cores hits a transport and what it is compared with alike. CPU per request is
the daemon's (``/proc/<pid>/stat``) and this process's (the clients, or ONNX
Runtime for ``direct``) over each cell's calls.

A transport is a :class:`Transport`: a name, which of the daemon's URLs it
dials, and how one client opens (:class:`TransportClient`: its ``infer``, how
its outputs are read back, its ``close``); another transport is one more entry
in :data:`TRANSPORTS`, and its target one more entry in :func:`targets`.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

from bench.cpu_time import process_cpu_s
from bench.floors import DirectSession, SocketFloor
from bench.latency import Round, Summary, closed_loops, timed_calls
from bench.workload import Workload

MODELS = ("add_sub", "lane")
CONCURRENCY = (1, 8)
MAX_CALLS = 200_000
C8_SCALE = 1.5
"""Cells at concurrency 8 run this many times a cell's seconds: each of 8
clients gets fewer calls per second."""


class TransportClient(Protocol):
    """One client of one transport for one model, used by one thread."""

    def infer(self) -> object:
        """One request; what the client library answered."""

    def outputs(self, answer: object) -> list[np.ndarray]:
        """The model's outputs in ``answer``, in the workload's order."""

    def close(self) -> None: ...


class HttpBinaryClient:
    """``tritonclient.http``, binary tensors both ways, one keep-alive connection."""

    def __init__(self, url: str, workload: Workload) -> None:
        self._client = httpclient.InferenceServerClient(
            url, connection_timeout=30, network_timeout=60
        )
        self._workload = workload
        self._inputs = workload.triton_inputs()
        self._outputs = workload.triton_outputs()

    def infer(self) -> httpclient.InferResult:
        return self._client.infer(self._workload.name, self._inputs, outputs=self._outputs)

    def outputs(self, answer: object) -> list[np.ndarray]:
        return [answer.as_numpy(name) for name in self._workload.output_names]

    def close(self) -> None:
        self._client.close()


class GrpcClient:
    """``tritonclient.grpc``: raw contents both ways, one channel per client
    (hence one HTTP/2 connection per client thread, as HTTP's keep-alive)."""

    def __init__(self, url: str, workload: Workload) -> None:
        self._client = grpcclient.InferenceServerClient(url)
        self._workload = workload
        self._inputs = []
        for name, array in workload.feeds.items():
            tensor = grpcclient.InferInput(name, list(array.shape), "FP32")
            tensor.set_data_from_numpy(array)
            self._inputs.append(tensor)
        self._outputs = [grpcclient.InferRequestedOutput(n) for n in workload.output_names]

    def infer(self) -> grpcclient.InferResult:
        return self._client.infer(
            self._workload.name, self._inputs, outputs=self._outputs, client_timeout=60
        )

    def outputs(self, answer: object) -> list[np.ndarray]:
        return [answer.as_numpy(name) for name in self._workload.output_names]

    def close(self) -> None:
        self._client.close()


_REGION_NUMBERS = itertools.count()


class SystemShmClient:
    """A client of ``module`` (``tritonclient.http`` or ``tritonclient.grpc``)
    whose tensors stay in two system shared memory regions of its own, one for
    the inputs and one for the outputs, registered with the daemon while it is
    open. ``close`` unregisters and unlinks both, so a failed cell leaves no
    region behind; ``outputs`` copies out of the region (a view would keep the
    mapping from closing)."""

    def __init__(self, module, url: str, workload: Workload) -> None:
        self._module = module
        self._workload = workload
        if module is httpclient:
            self._client = httpclient.InferenceServerClient(
                url, connection_timeout=30, network_timeout=60
            )
        else:
            self._client = grpcclient.InferenceServerClient(url)
        tag = f"edgebox_bench_{os.getpid()}_{next(_REGION_NUMBERS)}"
        self._names = (f"{tag}_in", f"{tag}_out")
        arrays = list(workload.feeds.values())
        out_sizes = [int(np.prod(workload.output_shapes[n])) * 4 for n in workload.output_names]
        sizes = (sum(a.nbytes for a in arrays), sum(out_sizes))
        self._regions: list = []
        self._registered: list[str] = []
        try:
            for name, size in zip(self._names, sizes, strict=True):
                self._regions.append(shm.create_shared_memory_region(name, f"/{name}", size))
            shm.set_shared_memory_region(self._regions[0], arrays)
            for name, size in zip(self._names, sizes, strict=True):
                self._client.register_system_shared_memory(name, f"/{name}", size)
                self._registered.append(name)
        except BaseException:
            self.close()
            raise
        self._inputs = []
        offset = 0
        for name, array in workload.feeds.items():
            tensor = module.InferInput(name, list(array.shape), "FP32")
            tensor.set_shared_memory(self._names[0], array.nbytes, offset=offset)
            self._inputs.append(tensor)
            offset += array.nbytes
        self._outputs = []
        self._offsets = []
        offset = 0
        for name, size in zip(workload.output_names, out_sizes, strict=True):
            output = module.InferRequestedOutput(name)
            output.set_shared_memory(self._names[1], size, offset=offset)
            self._outputs.append(output)
            self._offsets.append(offset)
            offset += size

    def infer(self) -> object:
        return self._client.infer(self._workload.name, self._inputs, outputs=self._outputs)

    def outputs(self, answer: object) -> list[np.ndarray]:
        return [
            np.array(
                shm.get_contents_as_numpy(
                    self._regions[1], np.float32, self._workload.output_shapes[name], offset
                )
            )
            for name, offset in zip(self._workload.output_names, self._offsets, strict=True)
        ]

    def close(self) -> None:
        try:
            for name in self._registered:
                self._client.unregister_system_shared_memory(name)
        finally:
            self._client.close()
            for region in self._regions:
                shm.destroy_shared_memory_region(region)


@dataclass(frozen=True)
class Transport:
    name: str
    protocol: str
    """``http`` or ``grpc``: which of the daemon's ports it dials."""
    open: Callable[[str, Workload], TransportClient]
    shared_memory: bool = False
    """Needs the daemon's ``system_shared_memory`` extension."""


TRANSPORTS = (
    Transport("HTTP binary", "http", HttpBinaryClient),
    Transport("gRPC", "grpc", GrpcClient),
    Transport(
        "HTTP + system shm",
        "http",
        lambda url, workload: SystemShmClient(httpclient, url, workload),
        shared_memory=True,
    ),
    Transport(
        "gRPC + system shm",
        "grpc",
        lambda url, workload: SystemShmClient(grpcclient, url, workload),
        shared_memory=True,
    ),
)
SHM_OVER_DIRECT_US = 500.0
"""Issue 10: shared memory at c=1 within this of the direct call's p50."""


def served_transports(http_url: str) -> tuple[Transport, ...]:
    """:data:`TRANSPORTS` less the shared memory ones when the daemon does not
    list ``system_shared_memory`` among its extensions."""
    client = httpclient.InferenceServerClient(http_url, connection_timeout=30)
    try:
        extensions = client.get_server_metadata().get("extensions", [])
    finally:
        client.close()
    return tuple(
        t for t in TRANSPORTS if not t.shared_memory or "system_shared_memory" in extensions
    )


@dataclass
class Cell:
    """One measurement, taken once per round."""

    model: str
    what: str
    seconds: float
    measure: Callable[[float], Round]
    rounds: list[Round] = field(default_factory=list)
    client_cpu_us: list[float] = field(default_factory=list)
    daemon_cpu_us: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.model} {self.what}"


def cell_name(transport: Transport, concurrency: int) -> str:
    return f"{transport.name} c={concurrency}"


def measure(
    http_url: str,
    grpc_url: str,
    daemon_pid: int,
    workloads: dict[str, Workload],
    rounds: int,
    seconds: float,
    log: Callable[[str], None],
) -> tuple[dict, list[tuple]]:
    """The cells, the table, and the targets as ``(name, passed, text, ratio)``."""
    urls = {"http": http_url, "grpc": grpc_url}
    transports = served_transports(http_url)
    log("  transports: " + ", ".join(t.name for t in transports))
    for workload in workloads.values():
        if not workload.request_bytes:
            workload.measure_body_sizes(http_url)
    directs = {
        name: DirectSession(workloads[name].model_path, workloads[name].feeds) for name in MODELS
    }
    for name in MODELS:
        expected = directs[name].run()
        for transport in transports:
            _check(transport, urls[transport.protocol], workloads[name], expected)
    floor = SocketFloor()
    sockets = {
        name: floor.connect(workloads[name].request_bytes, workloads[name].response_bytes)
        for name in MODELS
    }
    try:
        cells: list[Cell] = []
        for name in MODELS:
            scale = 2.0 if name == "lane" else 1.0
            cells.append(Cell(name, "direct", seconds * scale, _bounded(directs[name].measure)))
            cells.append(Cell(name, "socket", seconds * scale, _bounded(sockets[name].measure)))
            for transport in transports:
                for concurrency in CONCURRENCY:
                    cells.append(
                        Cell(
                            name,
                            cell_name(transport, concurrency),
                            seconds * scale * (C8_SCALE if concurrency > 1 else 1.0),
                            _loop(
                                transport, urls[transport.protocol], workloads[name], concurrency
                            ),
                        )
                    )
        for cell in cells:
            cell.measure(min(cell.seconds, 0.3))
        for index in range(rounds):
            shift = index % len(cells)
            for cell in cells[shift:] + cells[:shift]:
                _take(cell, daemon_pid)
            log(
                f"  round {index + 1}/{rounds} p50 us: "
                + ", ".join(f"{c.label} {c.rounds[-1].p50_us:.0f}" for c in cells)
            )
    finally:
        for connection in sockets.values():
            connection.close()
        floor.close()
    by_key = {(c.model, c.what): c for c in cells}
    figures = _report(cells, by_key, workloads, log)
    figures["transports"] = [t.name for t in transports]
    return figures, targets(by_key)


def _check(transport: Transport, url: str, workload: Workload, expected: list) -> None:
    """One request, its outputs compared with ONNX Runtime's, so the figures
    are for a transport that delivers the right tensors."""
    client = transport.open(url, workload)
    try:
        got = client.outputs(client.infer())
    finally:
        client.close()
    for name, have, want in zip(workload.output_names, got, expected, strict=True):
        if have is None or not np.allclose(have, want, rtol=1e-4, atol=1e-5):
            raise AssertionError(
                f"{transport.name} {url}: model '{workload.name}' output '{name}' differs "
                "from ONNX Runtime's"
            )


def _bounded(run: Callable[[float, int], Round]) -> Callable[[float], Round]:
    return lambda duration_s: run(duration_s, MAX_CALLS)


def _loop(
    transport: Transport, url: str, workload: Workload, concurrency: int
) -> Callable[[float], Round]:
    """Closed-loop clients, each opened for the loop and sending one untimed
    request first (as ``bench/load.py``'s ``TritonLoad``)."""

    def run(duration_s: float) -> Round:
        if concurrency == 1:
            client = transport.open(url, workload)
            try:
                client.infer()
                return timed_calls(client.infer, duration_s, MAX_CALLS)
            finally:
                client.close()

        def open_client(_index: int):
            client = transport.open(url, workload)
            return client.infer, client.close

        return closed_loops(concurrency, duration_s, MAX_CALLS, open_client, transport.name)

    return run


def _take(cell: Cell, daemon_pid: int) -> None:
    client_before = process_cpu_s(os.getpid())
    daemon_before = process_cpu_s(daemon_pid)
    result = cell.measure(cell.seconds)
    client_after = process_cpu_s(os.getpid())
    daemon_after = process_cpu_s(daemon_pid)
    cell.rounds.append(result)
    if None not in (client_before, client_after, daemon_before, daemon_after):
        cell.client_cpu_us.append((client_after - client_before) / result.calls * 1e6)
        cell.daemon_cpu_us.append((daemon_after - daemon_before) / result.calls * 1e6)


def paired_ratio(
    numerator: Sequence[Round], denominator: Sequence[Round], value: Callable[[Round], float]
) -> float:
    """Median over rounds of value(numerator round) / value(same round's denominator)."""
    return statistics.median(
        value(a) / value(b) for a, b in zip(numerator, denominator, strict=True)
    )


def _p50(r: Round) -> float:
    return r.p50_us


def targets(cells: dict[tuple[str, str], Cell]) -> list[tuple]:
    """Issue 10's transport targets measured here, as ``(name, passed, text,
    ratio)``; each ratio is measured over allowed, passing at <= 1."""
    found = []
    for model in MODELS:
        grpc, http = cells[(model, "gRPC c=1")], cells[(model, "HTTP binary c=1")]
        ratio = paired_ratio(grpc.rounds, http.rounds, _p50)
        found.append(
            (
                f"{model} gRPC c=1 p50 <= HTTP binary c=1 p50",
                ratio <= 1.0,
                f"{Summary.of(grpc.rounds).p50_us:.0f} us vs "
                f"{Summary.of(http.rounds).p50_us:.0f} us "
                f"(median per-round ratio {ratio:.2f}, needs <= 1)",
                round(ratio, 3),
            )
        )
    grpc = cells[("add_sub", "gRPC c=1")]
    direct, sock = cells[("add_sub", "direct")], cells[("add_sub", "socket")]
    ratio = statistics.median(
        g.p50_us / (2 * (d.p50_us + s.p50_us))
        for g, d, s in zip(grpc.rounds, direct.rounds, sock.rounds, strict=True)
    )
    grpc_us, direct_us, sock_us = (Summary.of(c.rounds).p50_us for c in (grpc, direct, sock))
    found.append(
        (
            "add_sub gRPC c=1 p50 <= 2 x (direct p50 + socket round trip p50)",
            ratio <= 1.0,
            f"{grpc_us:.0f} us vs 2 x ({direct_us:.0f} + {sock_us:.0f}) = "
            f"{2 * (direct_us + sock_us):.0f} us (median per-round ratio {ratio:.2f}, needs <= 1)",
            round(ratio, 3),
        )
    )
    for transport in TRANSPORTS:
        shared = cells.get(("lane", cell_name(transport, 1)))
        if not transport.shared_memory or shared is None:
            continue
        direct = cells[("lane", "direct")]
        ratio = statistics.median(
            m.p50_us / (d.p50_us + SHM_OVER_DIRECT_US)
            for m, d in zip(shared.rounds, direct.rounds, strict=True)
        )
        shared_us, direct_us = (Summary.of(c.rounds).p50_us for c in (shared, direct))
        found.append(
            (
                f"lane {transport.name} c=1 p50 <= direct p50 + {SHM_OVER_DIRECT_US:.0f} us",
                ratio <= 1.0,
                f"{shared_us:.0f} us vs {direct_us:.0f} + {SHM_OVER_DIRECT_US:.0f} = "
                f"{direct_us + SHM_OVER_DIRECT_US:.0f} us "
                f"(median per-round ratio {ratio:.2f}, needs <= 1)",
                round(ratio, 3),
            )
        )
    return found


def _report(
    cells: list[Cell],
    by_key: dict[tuple[str, str], Cell],
    workloads: dict[str, Workload],
    log: Callable[[str], None],
) -> dict:
    """The table, and the figures for results.json. The last column pairs each
    transport cell's rounds with HTTP binary's at the same concurrency."""
    log(
        f"\n{'model':<8}{'measurement':<24}{'p50 us':>9}{'p99 us':>10}{'per s':>8}"
        f"{'p50 range':>14}{'CPU us/req':>17}   p50 / HTTP binary p50"
    )
    log(f"{'':<73}{'client':>8}{'daemon':>8}")
    figures: dict = {
        "bodies": {
            name: {"request_bytes": w.request_bytes, "response_bytes": w.response_bytes}
            for name, w in workloads.items()
            if name in MODELS
        },
        "cells": {},
    }
    for cell in cells:
        s = Summary.of(cell.rounds)
        document = s.as_dict()
        cpu = f"{'':>16}"
        if cell.client_cpu_us:
            client_us = statistics.median(cell.client_cpu_us)
            daemon_us = statistics.median(cell.daemon_cpu_us)
            cpu = f"{client_us:>8.0f}{daemon_us:>8.0f}"
            document["this_process_cpu_us_per_call"] = round(client_us, 1)
            document["daemon_cpu_us_per_call"] = round(daemon_us, 1)
        versus = ""
        concurrency = cell.what.rsplit("c=", 1)[-1] if "c=" in cell.what else None
        http = by_key.get((cell.model, f"HTTP binary c={concurrency}"))
        if http is not None and http is not cell:
            ratio = paired_ratio(cell.rounds, http.rounds, _p50)
            versus = f"   {ratio:.2f}"
            document["p50_over_http_binary"] = round(ratio, 3)
        log(
            f"{cell.model:<8}{cell.what:<24}{s.p50_us:>9.1f}{s.p99_us:>10.1f}"
            f"{s.rate_per_s:>8.0f}{f'{s.p50_low_us:.0f}-{s.p50_high_us:.0f}':>14} {cpu}{versus}"
        )
        figures["cells"][cell.label] = document
    log(
        "CPU us/req: 'client' is this process (the clients; ONNX Runtime for direct; one end\n"
        "for socket), 'daemon' the daemon process (idle during direct and socket).\n"
    )
    return figures
