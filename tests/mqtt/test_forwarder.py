"""The MQTT thread against a real mosquitto on loopback: status, events and
results arrive in order with their seq; a broker that goes away loses
nothing; a refused login and a silent broker are retried without spinning."""

from __future__ import annotations

import json
import logging

import pytest

from daemon_process import wait_for
from edgebox.backoff import Backoff
from edgebox.events import (
    EventBus,
    ModelQuarantined,
    ModelStateChanged,
    MqttLinkChanged,
    RolloutRejected,
    StreamLatency,
    StreamResult,
)
from edgebox.mqtt.forwarder import MqttForwarder
from edgebox.mqtt.routing import ResultPace, Router
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.topics import Topics
from mosquitto_broker import MosquittoBroker, SilentBroker, Subscriber, make_client

QUICK = Backoff(initial_s=0.05, max_s=0.2)


@pytest.fixture
def forwarders(tmp_path, device_id):
    """``forwarders(url, **settings)``: a started forwarder on its own bus,
    stopped at teardown."""
    started: list[MqttForwarder] = []

    def start(
        url: str,
        paces=None,
        refused_backoff: Backoff = QUICK,
        stats_log_interval_s: float = 60.0,
        backoff: Backoff = QUICK,
        backoff_after_up: Backoff = QUICK,
        started_at: float = 0.0,
        **fields,
    ):
        fields.setdefault("spool_path", tmp_path / "spool.sqlite")
        settings = MqttSettings(url=url, device_id=device_id, **fields)
        bus = EventBus()
        router = Router(Topics("edgebox", device_id), device_id, settings.qos, paces)
        forwarder = MqttForwarder(
            settings,
            bus,
            router,
            {"device": device_id, "edgebox_version": "test", "started_at": started_at},
            lambda: {"models": {"m": {"ready_versions": ["1"]}}, "streams": {}},
            backoff=backoff,
            refused_backoff=refused_backoff,
            backoff_after_up=backoff_after_up,
            connack_timeout_s=0.3,
            stats_log_interval_s=stats_log_interval_s,
        )
        forwarder.bus = bus
        forwarder.start()
        started.append(forwarder)
        return forwarder

    yield start
    for forwarder in started:
        assert forwarder.stop(5.0)


def documents(subscriber: Subscriber, topic: str) -> list[dict]:
    return [json.loads(m.payload) for m in subscriber.messages(topic)]


def result(stream: str, index: int) -> StreamResult:
    return StreamResult(
        stream, "m", "1", index, 0.0, 4, 4, StreamLatency(1.0, 0.0, 1.0, 2.0), {"x": index}
    )


def test_status_is_retained_online_and_offline_after_a_clean_stop(
    mosquitto, forwarders, caplog, device_id
):
    caplog.set_level(logging.WARNING, logger="edgebox.mqtt")
    forwarder = forwarders(mosquitto.url)
    wait_for(lambda: forwarder.stats().state == "connected", what="the link")
    with Subscriber(mosquitto, f"edgebox/{device_id}/status") as late:
        online = late.wait_for(lambda ms: ms, what="the retained status")[0]
    assert online.retain
    document = json.loads(online.payload)
    assert document["schema"] == {"name": "edgebox.status", "version": 1}
    assert document["state"] == "online"
    assert document["models"] == {"m": {"ready_versions": ["1"]}}

    assert forwarder.stop(5.0)
    with Subscriber(mosquitto, f"edgebox/{device_id}/status") as after:
        offline = after.wait_for(lambda ms: ms, what="the retained status")[0]
    document = json.loads(offline.payload)
    assert (document["state"], document["reason"]) == ("offline", "shutdown")
    assert document["seq"] > json.loads(online.payload)["seq"]
    assert "not this daemon's" not in caplog.text, "its own offline status taken for another's"


def test_events_arrive_in_order_with_consecutive_seq(mosquitto, forwarders, device_id):
    with Subscriber(mosquitto, f"edgebox/{device_id}/events") as subscriber:
        forwarder = forwarders(mosquitto.url)
        for version in range(1, 21):
            forwarder.bus.publish(ModelStateChanged("m", version, "READY"))
        subscriber.wait_for(
            lambda ms: len([m for m in ms if b"edgebox.model_state" in m.payload]) == 20,
            what="20 model events",
        )
    events = [
        d
        for d in documents(subscriber, f"edgebox/{device_id}/events")
        if d["schema"]["name"] == "edgebox.model_state"
    ]
    assert [d["version"] for d in events] == list(range(1, 21))
    seqs = [d["seq"] for d in documents(subscriber, f"edgebox/{device_id}/events")]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert all(d["device"] == device_id for d in events)


def test_a_rejected_rollout_and_a_quarantine_reach_the_events_topic(
    mosquitto, forwarders, device_id
):
    rejected = RolloutRejected(
        model="m",
        version=2,
        serving_version=1,
        policy="shadow",
        samples=12,
        samples_wanted=50,
        agreement=9 / 12,
        candidate_p95_ms=1.23456,
        serving_p95_ms=None,
        errors=0,
        dropped=1,
        reason="rollout: 9/12 answers agree (Y differs; min_agreement 0.95)",
    )
    quarantined = ModelQuarantined("m", 3, "quarantined: the daemon died while version 3 ...")
    topic = f"edgebox/{device_id}/events"
    with Subscriber(mosquitto, f"edgebox/{device_id}/#") as subscriber:
        forwarder = forwarders(mosquitto.url)
        forwarder.bus.publish(rejected)
        forwarder.bus.publish(quarantined)
        subscriber.wait_for(
            lambda ms: any(b"edgebox.model.quarantined" in m.payload for m in ms),
            what="the quarantine event",
        )
    by_name = {
        json.loads(m.payload)["schema"]["name"]: (m.topic, json.loads(m.payload))
        for m in subscriber.messages()
    }
    rejected_topic, rejected_document = by_name["edgebox.rollout.rejected"]
    quarantined_topic, quarantined_document = by_name["edgebox.model.quarantined"]
    assert rejected_topic == quarantined_topic == topic
    assert rejected_document == {
        **rejected.as_dict(),
        "device": device_id,
        "seq": rejected_document["seq"],
        "epoch": rejected_document["epoch"],
    }
    assert rejected_document["agreement"] == 0.75
    assert (quarantined_document["model"], quarantined_document["version"]) == ("m", 3)
    # Published in this order, so sent in it (the link's own event may come between).
    assert quarantined_document["seq"] > rejected_document["seq"]


def test_stream_results_are_thinned_by_their_pace(mosquitto, forwarders, device_id):
    with Subscriber(mosquitto, f"edgebox/{device_id}/streams/#") as subscriber:
        forwarder = forwarders(mosquitto.url, paces={"cam": ResultPace(every_n=3)})
        for index in range(9):
            forwarder.bus.publish(result("cam", index))
        subscriber.wait_for(lambda ms: len(ms) == 3, what="every third result")
    frames = [
        d["frame_index"] for d in documents(subscriber, f"edgebox/{device_id}/streams/cam/results")
    ]
    assert frames == [0, 3, 6]


@pytest.mark.private_broker
def test_messages_published_while_the_broker_is_down_all_arrive_in_order(
    mosquitto, forwarders, device_id
):
    forwarder = forwarders(mosquitto.url)
    wait_for(lambda: forwarder.stats().state == "connected", what="the link")
    mosquitto.stop()
    wait_for(lambda: forwarder.stats().state == "disconnected", what="the link to drop")
    for index in range(50):
        forwarder.bus.publish(result("cam", index))
    wait_for(lambda: forwarder.stats().spool_rows >= 50, what="50 spooled rows")
    mosquitto.restart()
    with Subscriber(mosquitto, f"edgebox/{device_id}/streams/#") as subscriber:
        # Some may have gone out before the subscriber came: only the tail is checked.
        forwarder.bus.publish(result("cam", 50))
        subscriber.wait_for(
            lambda ms: any(json.loads(m.payload)["frame_index"] == 50 for m in ms),
            what="the result published after the outage",
        )
    wait_for(lambda: forwarder.stats().spool_rows == 0, what="the spool to drain")
    stats = forwarder.stats()
    assert stats.acknowledged >= 51
    assert stats.dropped == {}


@pytest.mark.private_broker
def test_a_link_that_was_up_recently_comes_back_soon_after_its_broker(
    mosquitto, forwarders, caplog
):
    """Issue 19: after an outage the retry delay had grown past the outage,
    so devices came back 15-18 s after their broker. Here the plain backoff
    would wait at least 12.8 s after the ninth failed retry; the cap for a
    link that was up a moment ago is 0.2 s."""
    caplog.set_level(logging.DEBUG, logger="edgebox.mqtt")
    forwarder = forwarders(
        mosquitto.url,
        backoff=Backoff(initial_s=0.05, max_s=60.0),
        backoff_after_up=Backoff(initial_s=0.05, max_s=0.2),
    )
    wait_for(lambda: forwarder.stats().state == "connected", what="the link")
    mosquitto.stop()
    wait_for(
        lambda: any("retry 9 failed" in r.getMessage() for r in caplog.records),
        what="nine failed retries",
    )
    mosquitto.restart()
    wait_for(lambda: forwarder.stats().state == "connected", timeout_s=8.0, what="the link back")


def test_a_refused_login_is_logged_once_and_retried_slowly(tmp_path, forwarders, caplog):
    password_file = tmp_path / "password"
    password_file.write_text("wrong\n")
    with MosquittoBroker(tmp_path / "broker", users={"edge": "right"}) as broker:
        caplog.set_level(logging.ERROR, logger="edgebox.mqtt")
        forwarder = forwarders(
            broker.url,
            refused_backoff=Backoff(initial_s=0.1, max_s=0.1),
            username="edge",
            password_file=password_file,
        )
        wait_for(
            lambda: broker.log_text().count("not authorised") >= 3, what="three refused logins"
        )
        assert forwarder.stats().state == "refused"
    refusals = [r.getMessage() for r in caplog.records if "refused the login" in r.getMessage()]
    assert refusals == [
        f"MQTT: broker 127.0.0.1:{broker.port} refused the login for user 'edge': "
        "Not authorized; retrying slowly (every 0.1-0.1 s)"
    ]
    assert "wrong" not in caplog.text


def test_a_broker_that_never_answers_is_given_up_and_retried(forwarders):
    with SilentBroker() as silent:
        forwarder = forwarders(silent.url)
        wait_for(lambda: silent.accepted >= 2, what="a second connection attempt")
        assert forwarder.stats().state in ("disconnected", "connecting")
        forwarder.bus.publish(result("cam", 1))
        wait_for(lambda: forwarder.stats().spool_rows >= 1, what="the result to be spooled")


def test_tls_with_a_client_certificate_connects_and_delivers(tmp_path, forwarders, device_id):
    with MosquittoBroker(tmp_path / "broker", tls=True) as broker:
        with Subscriber(broker, f"edgebox/{device_id}/events") as subscriber:
            forwarder = forwarders(
                broker.url,
                ca_file=broker.ca_file,
                cert_file=broker.client_cert_file,
                key_file=broker.client_key_file,
            )
            forwarder.bus.publish(ModelStateChanged("m", 1, "READY"))
            subscriber.wait_for(
                lambda ms: any(b"edgebox.model_state" in m.payload for m in ms),
                what="the event over TLS",
            )
        assert broker.url.startswith("mqtts://")
        assert forwarder.stop(5.0)


def test_mqtt_3_1_1_delivers_status_and_events(mosquitto, forwarders, device_id):
    with Subscriber(mosquitto, f"edgebox/{device_id}/#") as subscriber:
        forwarder = forwarders(mosquitto.url, protocol="3.1.1")
        forwarder.bus.publish(ModelStateChanged("m", 1, "READY"))
        subscriber.wait_for(
            lambda ms: (
                any(b"edgebox.model_state" in m.payload for m in ms)
                and any(m.topic == f"edgebox/{device_id}/status" for m in ms)
            ),
            what="status and the event over MQTT 3.1.1",
        )


def test_a_spool_that_cannot_be_written_becomes_memory_only_and_says_so(
    tmp_path, mosquitto, forwarders, device_id
):
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    with Subscriber(mosquitto, f"edgebox/{device_id}/events") as subscriber:
        forwarder = forwarders(mosquitto.url, spool_path=not_a_folder / "spool.sqlite")
        forwarder.bus.publish(ModelStateChanged("m", 1, "READY"))
        degraded = subscriber.wait_for(
            lambda ms: [
                json.loads(m.payload) for m in ms if b"edgebox.spool_degraded" in m.payload
            ],
            what="the spool_degraded event",
        )[0]
        subscriber.wait_for(
            lambda ms: any(b"edgebox.model_state" in m.payload for m in ms),
            what="the event, sent from memory",
        )
    assert str(not_a_folder) in degraded["reason"]
    assert forwarder.stats().degraded == degraded["reason"]


def test_the_link_figures_are_logged_when_they_change(mosquitto, forwarders, caplog):
    caplog.set_level(logging.INFO, logger="edgebox.mqtt")
    forwarder = forwarders(mosquitto.url, stats_log_interval_s=0.05)
    forwarder.bus.publish(ModelStateChanged("m", 1, "READY"))
    wait_for(
        lambda: any("acknowledged 3" in r.getMessage() for r in caplog.records),
        what="a figures line with the three acknowledged messages",
    )
    line = next(r.getMessage() for r in caplog.records if "acknowledged 3" in r.getMessage())
    assert line.startswith(
        f"MQTT: connected (127.0.0.1:{mosquitto.port}); sent 3, acknowledged 3; spool 0 messages"
    )


def test_the_right_password_logs_in(tmp_path, forwarders):
    password_file = tmp_path / "password"
    password_file.write_text("right\n")
    with MosquittoBroker(tmp_path / "broker", users={"edge": "right"}) as broker:
        forwarder = forwarders(broker.url, username="edge", password_file=password_file)
        wait_for(lambda: forwarder.stats().state == "connected", what="the login")
        assert forwarder.stop(5.0)


def test_a_retained_offline_from_another_client_is_replaced_by_our_status(
    mosquitto, forwarders, device_id
):
    """Issue 19: a retained ``offline`` published by another client stayed
    until the daemon's next state change."""
    with Subscriber(mosquitto, f"edgebox/{device_id}/status") as watcher:
        forwarder = forwarders(mosquitto.url, started_at=1718000000.5)
        watcher.wait_for(lambda ms: ms, what="the online status")
        stale = {"state": "offline", "started_at": 1.0, "reason": "connection lost", "seq": 9}
        other = make_client(mosquitto)
        other.connect("127.0.0.1", mosquitto.port)
        other.loop_start()
        other.publish(
            f"edgebox/{device_id}/status", json.dumps(stale), qos=1, retain=True
        ).wait_for_publish(5)
        other.disconnect()
        other.loop_stop()
        watcher.wait_for(
            lambda ms: len(ms) >= 3 and json.loads(ms[-1].payload)["state"] == "online",
            what="our status published again after the stale one",
        )
    with Subscriber(mosquitto, f"edgebox/{device_id}/status") as late:
        retained = late.wait_for(lambda ms: ms, what="the retained status")[0]
    assert json.loads(retained.payload)["state"] == "online"
    assert forwarder.stats().state == "connected"


@pytest.mark.parametrize("client_ids", [("", ""), ("edgebox-a", "edgebox-b")], ids=["one", "two"])
def test_two_daemons_with_one_device_id_are_reported_as_a_conflict(
    mosquitto, forwarders, caplog, client_ids, device_id
):
    """Issue 19: cloned devices with one device id knocked each other off the
    broker in a loop ("Unspecified error") and nothing said why. With one
    client id they take turns on the broker; with two they both publish."""
    caplog.set_level(logging.ERROR, logger="edgebox.mqtt")
    first = forwarders(mosquitto.url, started_at=1.5, client_id=client_ids[0])
    links = first.bus.subscribe(MqttLinkChanged)
    wait_for(lambda: first.stats().state == "connected", what="the first daemon")
    second = forwarders(mosquitto.url, started_at=2.5, client_id=client_ids[1])
    wait_for(
        lambda: any(
            f"another daemon publishes as device '{device_id}'" in r.getMessage()
            for r in caplog.records
        ),
        what="the conflict in the log",
    )
    conflicts = [r.getMessage() for r in caplog.records if "another daemon" in r.getMessage()]
    assert "two devices share this device id; give each its own mqtt.device_id" in conflicts[0]
    assert first.stop(5.0) and second.stop(5.0)
    events = [e for e in links.get_batch(1000, 0) if e.state == "conflict"]
    if any("not ours 1.5" in message for message in conflicts):
        assert events and f"MQTT: {events[0].reason}" in conflicts


def test_an_event_is_sent_at_once_not_when_the_socket_wait_times_out(
    mosquitto, forwarders, device_id, monkeypatch
):
    """The MQTT thread waits on the broker's socket (paho's select) and on
    the bus (``Waker``): with the socket wait stretched to a minute, a result
    still reaches the subscriber well inside the test's 10 s."""
    from edgebox.mqtt import forwarder as forwarder_module

    monkeypatch.setattr(forwarder_module, "LOOP_TIMEOUT_S", 60.0)
    topic = f"edgebox/{device_id}/streams/cam/results"
    with Subscriber(mosquitto, topic) as subscriber:
        forwarder = forwarders(mosquitto.url)
        wait_for(lambda: forwarder.stats().state == "connected", what="the link")
        for index in range(3):
            forwarder.bus.publish(result("cam", index))
            subscriber.wait_for(lambda ms, n=index: len(ms) == n + 1, 10, what=f"result {index}")
    assert [d["frame_index"] for d in documents(subscriber, topic)] == [0, 1, 2]
