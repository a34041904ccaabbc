"""The daemon publishing to a real mosquitto: what a subscriber sees, and
that nothing is lost when the broker or the daemon goes away."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import sqlite3
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from daemon_process import DaemonProcess, explicit_control, wait_for
from model_fixtures import (
    add_add_sub,
    add_publishing_add_sub,
    add_sub_infer_inputs,
    copy_demo_repository,
)
from mosquitto_broker import SilentBroker, Subscriber, daemon_mqtt_flags
from scripts.demo_broker import free_loopback_port

STREAM = "[{name: road, source: 'synthetic:road', model: lane_pipeline, fps: 10}]"


def post(daemon: DaemonProcess, path: str) -> None:
    request = urllib.request.Request(f"http://{daemon.url}{path}", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=30) as reply:
        assert reply.status == 200


def offline_cycles_spooled(spool, device_id: str) -> bool:
    """True once the spool holds the third unload and the load after it."""
    with sqlite3.connect(spool) as db:
        rows = db.execute(
            "SELECT payload FROM rows WHERE topic = ?", (f"edgebox/{device_id}/events",)
        )
        documents = [json.loads(bytes(payload)) for (payload,) in rows]
    unloads = [d["seq"] for d in documents if d.get("state") == "UNLOADING"]
    ready = [d["seq"] for d in documents if d.get("state") == "READY"]
    return len(unloads) == 3 and bool(ready) and max(ready) > max(unloads)


def add_sub_states(messages, device_id: str) -> list[str]:
    documents = [
        json.loads(m.payload) for m in messages if m.topic == f"edgebox/{device_id}/events"
    ]
    return [
        d["state"]
        for d in documents
        if d.get("model") == "add_sub" and d.get("state") in ("UNAVAILABLE", "READY")
    ]


def payloads(subscriber: Subscriber, topic: str) -> list[dict]:
    return [json.loads(m.payload) for m in subscriber.messages(topic)]


@pytest.fixture(scope="module")
def demo_repository(tmp_path_factory):
    return copy_demo_repository(tmp_path_factory.mktemp("demo") / "models")


def test_subscriber_sees_status_model_events_and_lane_results(
    demo_repository, mosquitto, tmp_path, device_id
):
    results = f"edgebox/{device_id}/streams/road/results"
    with (
        Subscriber(mosquitto, f"edgebox/{device_id}/#") as subscriber,
        DaemonProcess(
            demo_repository,
            tmp_path / "daemon.log",
            [
                *daemon_mqtt_flags(mosquitto.url, device_id, tmp_path / "spool.sqlite"),
                "--repository-poll-secs",
                "0.2",
            ],
            env={"EDGEBOX_STREAMS": STREAM},
        ) as daemon,
    ):
        subscriber.wait_for(
            lambda ms: [m for m in ms if m.topic == results][3:],
            timeout_s=60,
            what=f"four lane results ({daemon.log_path})",
        )
        status = subscriber.wait_for(
            lambda ms: [
                d
                for d in (
                    json.loads(m.payload) for m in ms if m.topic == f"edgebox/{device_id}/status"
                )
                if "lane_pipeline" in d.get("models", {})
            ],
            what="a status listing lane_pipeline",
        )[-1]
        assert status["state"] == "online"
        assert status["models"]["lane_pipeline"] == {"ready_versions": ["1"]}
        assert status["streams"] == {"road": "running"}
        result = payloads(subscriber, results)[-1]
        assert result["schema"]["name"] == "edgebox.stream_result"
        assert isinstance(result["outputs"]["lanes"], list)
        loaded = [
            e
            for e in payloads(subscriber, f"edgebox/{device_id}/events")
            if e["schema"]["name"] == "edgebox.model_state" and e["model"] == "lane_detector"
        ]
        assert {"READY"} <= {e["state"] for e in loaded}

        add_add_sub(demo_repository, "late_add_sub")
        subscriber.wait_for(
            lambda ms: any(
                json.loads(m.payload).get("model") == "late_add_sub"
                and json.loads(m.payload).get("state") == "READY"
                for m in ms
                if m.topic == f"edgebox/{device_id}/events"
            ),
            timeout_s=30,
            what="the event for a model dropped into the repository",
        )


def test_last_will_says_offline_after_sigkill(tmp_path, mosquitto, device_id, add_sub_repository):
    daemon = DaemonProcess(
        add_sub_repository,
        tmp_path / "daemon.log",
        daemon_mqtt_flags(mosquitto.url, device_id, tmp_path / "s"),
    )
    daemon.start()
    with Subscriber(mosquitto, f"edgebox/{device_id}/status") as subscriber:
        subscriber.wait_for(lambda ms: ms, what="the retained online status")
        daemon.process.send_signal(signal.SIGKILL)
        daemon.process.wait(10)
        document = subscriber.wait_for(
            lambda ms: [json.loads(m.payload) for m in ms if b'"offline"' in m.payload],
            what="the last will",
        )[0]
    assert document["reason"] == "connection lost"
    assert document["schema"] == {"name": "edgebox.status", "version": 1}


@pytest.mark.private_broker
def test_sigkill_while_the_broker_is_down_loses_nothing_written_and_reuses_no_identity(
    tmp_path, mosquitto, device_id, add_sub_repository
):
    spool = tmp_path / "spool.sqlite"
    args = [
        *daemon_mqtt_flags(mosquitto.url, device_id, spool),
        *explicit_control("add_sub"),
    ]
    with Subscriber(mosquitto, f"edgebox/{device_id}/events") as subscriber:
        first = DaemonProcess(add_sub_repository, tmp_path / "first.log", args).start()
        subscriber.wait_for(lambda ms: ms, what="the first run's events")
        mosquitto.stop()
        for _ in range(3):
            post(first, "/v2/repository/models/add_sub/unload")
            post(first, "/v2/repository/models/add_sub/load")
        # Killed only once they are committed: events still in the bus queue
        # are in memory, and kill -9 loses those by design.
        wait_for(
            lambda: offline_cycles_spooled(spool, device_id), what="the offline events in the spool"
        )
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)

    mosquitto.restart()
    with (
        Subscriber(mosquitto, f"edgebox/{device_id}/events") as subscriber,
        DaemonProcess(add_sub_repository, tmp_path / "second.log", args),
    ):
        subscriber.wait_for(
            lambda ms: len(add_sub_states(ms, device_id)) >= 7,
            timeout_s=30,
            what=f"the offline run's events after the restart ({tmp_path})",
        )
    # At least once: a message in flight when the broker went away comes
    # again, with its epoch and seq; those never stand for two different
    # messages. The run after the kill starts an epoch of its own.
    by_identity: dict[tuple[str, int], bytes] = {}
    epochs: list[str] = []
    for message in subscriber.messages(f"edgebox/{device_id}/events"):
        document = json.loads(message.payload)
        identity = (document["epoch"], document["seq"])
        assert by_identity.setdefault(identity, message.payload) == message.payload, identity
        if document["epoch"] not in epochs:
            epochs.append(document["epoch"])
    assert len(epochs) == 2, epochs
    for epoch in epochs:
        seqs = sorted(seq for e, seq in by_identity if e == epoch)
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), f"a gap in epoch {epoch}: {seqs}"
    assert min(seq for e, seq in by_identity if e == epochs[1]) == 1
    unique = [json.loads(by_identity[key]) for key in sorted(by_identity) if key[0] == epochs[0]]
    states = [
        d["state"]
        for d in unique
        if d.get("model") == "add_sub" and d["state"] in ("UNAVAILABLE", "READY")
    ]
    offline = ["UNAVAILABLE", "READY"] * 3
    assert any(states[i : i + 6] == offline for i in range(len(states))), states


def add_sub_inputs(client_module):
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.float32)
    return a, b, add_sub_infer_inputs(client_module, a, b)


def test_an_opted_in_model_publishes_its_http_and_grpc_answers(tmp_path, mosquitto, device_id):
    repository = tmp_path / "models"
    add_publishing_add_sub(repository)
    with (
        Subscriber(mosquitto, f"edgebox/{device_id}/models/#") as subscriber,
        DaemonProcess(
            repository,
            tmp_path / "daemon.log",
            daemon_mqtt_flags(mosquitto.url, device_id, tmp_path / "spool"),
        ) as daemon,
    ):
        a, b, inputs = add_sub_inputs(httpclient)
        with httpclient.InferenceServerClient(daemon.url) as client:
            client.infer("add_sub", inputs, request_id="over-http")
        _, _, inputs = add_sub_inputs(grpcclient)
        with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
            client.infer("add_sub", inputs, request_id="over-grpc")
        subscriber.wait_for(lambda ms: len(ms) >= 2, what="two model results")
        documents = [json.loads(m.payload) for m in subscriber.messages()]
    assert {d["request_id"] for d in documents} == {"over-http", "over-grpc"}
    for document in documents:
        assert document["schema"] == {"name": "edgebox.model_result", "version": 1}
        assert (document["model"], document["model_version"]) == ("add_sub", "1")
        assert document["outputs"]["OUTPUT0"] == (a + b).tolist()
        assert document["outputs"]["OUTPUT1"] == (a - b).tolist()


def test_a_version_swap_in_poll_mode_is_two_events(
    tmp_path, mosquitto, device_id, add_sub_repository
):
    with (
        Subscriber(mosquitto, f"edgebox/{device_id}/events") as subscriber,
        DaemonProcess(
            add_sub_repository,
            tmp_path / "daemon.log",
            [
                *daemon_mqtt_flags(mosquitto.url, device_id, tmp_path / "spool"),
                "--repository-poll-secs",
                "0.2",
            ],
        ),
    ):
        subscriber.wait_for(lambda ms: ms, what="the first events")
        add_add_sub(add_sub_repository, versions=(2,))

        def swap(messages):
            states = [
                (d["version"], d["state"])
                for d in (json.loads(m.payload) for m in messages)
                if d.get("model") == "add_sub"
            ]
            return (2, "READY") in states and (1, "UNAVAILABLE") in states and states

        states = subscriber.wait_for(swap, timeout_s=30, what="version 2 ready, version 1 retired")
    assert states.index((2, "READY")) < states.index((1, "UNAVAILABLE"))


@pytest.mark.parametrize("broker", ["down", "silent"])
def test_a_broker_in_trouble_fails_no_http_request(tmp_path, broker):
    repository = tmp_path / "models"
    add_publishing_add_sub(repository)
    with SilentBroker() as silent:
        url = silent.url if broker == "silent" else f"mqtt://127.0.0.1:{free_loopback_port()}"
        args = ["--mqtt-url", url, "--mqtt-spool-path", str(tmp_path / "spool.sqlite")]
        with DaemonProcess(repository, tmp_path / "daemon.log", args) as daemon:

            def client_loop(_index: int) -> int:
                a, b, inputs = add_sub_inputs(httpclient)
                with httpclient.InferenceServerClient(daemon.url) as client:
                    for _ in range(100):
                        result = client.infer("add_sub", inputs)
                        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
                return 100

            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                assert sum(pool.map(client_loop, range(4))) == 400


@pytest.mark.private_broker
def test_every_result_seq_arrives_in_order_across_a_ten_second_outage(
    demo_repository, mosquitto, tmp_path, device_id
):
    spool = tmp_path / "spool.sqlite"
    topic = f"edgebox/{device_id}/streams/road/results"

    def seqs(subscriber: Subscriber) -> list[int]:
        return [json.loads(m.payload)["seq"] for m in subscriber.messages(topic)]

    def spooled_results() -> int:
        with sqlite3.connect(spool) as db:
            return db.execute("SELECT COUNT(*) FROM rows WHERE topic = ?", (topic,)).fetchone()[0]

    with DaemonProcess(
        demo_repository,
        tmp_path / "daemon.log",
        daemon_mqtt_flags(mosquitto.url, device_id, spool),
        env={"EDGEBOX_STREAMS": STREAM},
    ) as daemon:
        with Subscriber(mosquitto, topic) as before:
            before.wait_for(lambda ms: len(ms) >= 5, timeout_s=60, what="results before")
            mosquitto.stop()
            down_at = time.monotonic()
            wait_for(
                lambda: time.monotonic() - down_at >= 10 and spooled_results() >= 20,
                timeout_s=60,
                what="ten seconds of results spooled while the broker is down",
            )
        # Frozen while the broker restarts, so the subscriber below is in
        # place before the daemon can reconnect and send its backlog.
        daemon.process.send_signal(signal.SIGSTOP)
        try:
            mosquitto.restart()
            after = Subscriber(mosquitto, topic).connect()
        finally:
            daemon.process.send_signal(signal.SIGCONT)
        try:
            after.wait_for(
                lambda ms: len(ms) >= spooled_results() + 20,
                timeout_s=60,
                what="the backlog and new results after the outage",
            )
        finally:
            after.close()
    seen_before, seen_after = seqs(before), seqs(after)
    assert seen_before == sorted(seen_before)
    unique_after = sorted(set(seen_after))
    assert seen_after == sorted(seen_after), "out of order after the outage"
    every = sorted(set(seen_before) | set(unique_after))
    assert every == list(range(every[0], every[-1] + 1)), "a result seq is missing"
