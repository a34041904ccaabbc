"""SIGTERM, through the real daemon: requests in flight over HTTP and gRPC
finish with their answers, an open gRPC stream ends with a status (UNAVAILABLE, with why), a
model that never returns is cut at ``exit_timeout_secs``, the MQTT events of
the shutdown itself reach the broker (or the spool when there is none), and
the exit status is 0 each time."""

from __future__ import annotations

import concurrent.futures
import json
import queue
import sqlite3
import time

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from daemon_process import DaemonProcess, explicit_control, wait_for
from model_fixtures import (
    PYTHON_XY_CONFIG,
    add_add_sub,
    add_publishing_add_sub,
    add_sub_infer_inputs,
    write_model,
)
from mosquitto_broker import Subscriber, daemon_mqtt_flags
from scripts.demo_broker import free_loopback_port

STREAM_END_TEXT = "the server is shutting down; this stream takes no more requests"

GATE_MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils

STARTED = {started!r}
RELEASE = {release!r}


class TritonPythonModel:
    def execute(self, requests):
        with open(STARTED, "a") as started:
            started.write("x\\n")
        deadline = time.monotonic() + {wait_s}
        while not os.path.exists(RELEASE) and time.monotonic() < deadline:
            time.sleep(0.01)
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)]
            )
            for r in requests
        ]
"""
"""Records that a request reached it, then holds it until the test creates
the release file (or ``wait_s`` passes: a test that fails never hangs)."""


def add_gate(tmp_path, wait_s: float, instances: int = 2) -> tuple:
    started, release = tmp_path / "started", tmp_path / "release"
    config = PYTHON_XY_CONFIG.format(name="gate") + (
        f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n"
    )
    write_model(
        tmp_path / "models",
        "gate",
        config,
        {
            "1/model.py": GATE_MODEL.format(
                started=str(started), release=str(release), wait_s=wait_s
            )
        },
    )
    return started, release


def started_count(started) -> int:
    return len(started.read_text().splitlines()) if started.exists() else 0


def xy_input(module, value: float):
    tensor = module.InferInput("X", [2], "FP32")
    tensor.set_data_from_numpy(np.full(2, value, np.float32))
    return tensor


def test_requests_in_flight_at_sigterm_finish_with_their_answers(tmp_path):
    started, release = add_gate(tmp_path, wait_s=60)
    daemon = DaemonProcess(
        tmp_path / "models", tmp_path / "daemon.log", ["--exit-timeout-secs", "20"]
    ).start()
    try:
        http_client = httpclient.InferenceServerClient(daemon.url, network_timeout=60)
        grpc_client = grpcclient.InferenceServerClient(daemon.grpc_url)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            over_http = pool.submit(http_client.infer, "gate", [xy_input(httpclient, 1)])
            over_grpc = pool.submit(
                grpc_client.infer, "gate", [xy_input(grpcclient, 2)], client_timeout=60
            )
            wait_for(lambda: started_count(started) == 2, 30, what="both requests in the model")
            daemon.process.send_signal(15)
            wait_for(lambda: "shutting down" in daemon.log(), 10, what="the shutdown to begin")
            release.touch()
            assert list(over_http.result(30).as_numpy("Y")) == [2.0, 2.0]
            assert list(over_grpc.result(30).as_numpy("Y")) == [4.0, 4.0]
        assert daemon.stop() == 0, daemon.log()
        http_client.close()
        grpc_client.close()
    finally:
        release.touch()
        daemon.stop()


def test_an_open_grpc_stream_ends_with_unavailable_at_sigterm(tmp_path):
    add_add_sub(tmp_path / "models")
    daemon = DaemonProcess(tmp_path / "models", tmp_path / "daemon.log", []).start()
    requests: queue.Queue = queue.Queue()

    def outgoing():
        while (request := requests.get(timeout=60)) is not None:
            yield request

    try:
        channel = grpc.insecure_channel(daemon.grpc_url)
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        call = stub.ModelStreamInfer(outgoing(), timeout=60)
        request = service_pb2.ModelInferRequest(model_name="add_sub", id="one")
        for name in ("INPUT0", "INPUT1"):
            tensor = request.inputs.add(name=name, datatype="FP32", shape=[1, 16])
            tensor.contents.fp32_contents.extend([1.0] * 16)
        requests.put(request)
        first = next(call)
        assert first.error_message == "" and first.infer_response.id == "one"
        assert daemon.stop() == 0, daemon.log()
        # A status the client can act on (reconnect elsewhere), not a reset.
        try:
            rest = list(call)
        except grpc.RpcError:
            rest = []
        assert rest == []
        assert call.code() == grpc.StatusCode.UNAVAILABLE, (call.code(), call.details())
        assert call.details() == STREAM_END_TEXT
        channel.close()
    finally:
        requests.put(None)
        daemon.stop()


def test_a_model_that_never_returns_is_cut_at_exit_timeout_and_exit_is_zero(tmp_path):
    started, release = add_gate(tmp_path, wait_s=3600, instances=1)
    daemon = DaemonProcess(
        tmp_path / "models", tmp_path / "daemon.log", ["--exit-timeout-secs", "3"]
    ).start()
    try:
        client = httpclient.InferenceServerClient(daemon.url, network_timeout=60)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            stuck = pool.submit(client.infer, "gate", [xy_input(httpclient, 1)])
            wait_for(lambda: started_count(started) == 1, 30, what="the request in the model")
            begun = time.monotonic()
            assert daemon.stop() == 0, daemon.log()
            took = time.monotonic() - begun
            assert took < 3 + 3, f"exit took {took:.1f} s with exit_timeout_secs 3"
            assert "exit timeout reached with requests still running; exiting anyway" in (
                daemon.log()
            )
            # The request never gets an answer: its connection closes with the process.
            assert stuck.exception(30) is not None
        client.close()
    finally:
        release.touch()
        daemon.stop()


def mqtt_args(url: str, device_id: str, spool) -> list[str]:
    flags = daemon_mqtt_flags(url, device_id, spool)
    return [*flags, *explicit_control("add_sub")]


def shutdown_unload(documents: list[dict]) -> bool:
    return any(d.get("model") == "add_sub" and d.get("state") == "UNLOADING" for d in documents)


def test_events_of_the_shutdown_reach_the_broker_before_exit(tmp_path, mosquitto, device_id):
    spool = tmp_path / "spool.sqlite"
    with Subscriber(mosquitto, f"edgebox/{device_id}/#") as subscriber:
        add_publishing_add_sub(tmp_path / "models")
        daemon = DaemonProcess(
            tmp_path / "models", tmp_path / "daemon.log", mqtt_args(mosquitto.url, device_id, spool)
        ).start()
        subscriber.wait_for(
            lambda ms: any(m.topic == f"edgebox/{device_id}/status" for m in ms),
            what="status online",
        )
        with httpclient.InferenceServerClient(daemon.url) as client:
            ones = np.ones((1, 16), np.float32)
            client.infer("add_sub", add_sub_infer_inputs(httpclient, ones, ones))
        assert daemon.stop() == 0, daemon.log()
        # The unload at shutdown is queued after every request finished, just
        # before the MQTT thread stops: it must still go out.
        subscriber.wait_for(
            lambda ms: shutdown_unload([json.loads(m.payload) for m in ms]),
            timeout_s=10,
            what=f"the shutdown's UNLOADING event ({tmp_path})",
        )
        subscriber.wait_for(
            lambda ms: (
                [json.loads(m.payload)["state"] for m in ms if m.topic.endswith("/status")][-1]
                == "offline"
            ),
            timeout_s=10,
            what="the offline status, last",
        )
    with sqlite3.connect(spool) as db:
        assert db.execute("SELECT COUNT(*) FROM rows").fetchone()[0] == 0


def test_events_of_the_shutdown_are_spooled_when_the_broker_is_down(tmp_path):
    spool = tmp_path / "spool.sqlite"
    add_publishing_add_sub(tmp_path / "models")
    url = f"mqtt://127.0.0.1:{free_loopback_port()}"
    daemon = DaemonProcess(
        tmp_path / "models", tmp_path / "daemon.log", mqtt_args(url, "dev", spool)
    ).start()
    assert daemon.stop() == 0, daemon.log()
    with sqlite3.connect(spool) as db:
        rows = db.execute("SELECT payload FROM rows WHERE topic = 'edgebox/dev/events'")
        documents = [json.loads(bytes(payload)) for (payload,) in rows]
    assert shutdown_unload(documents), documents
