"""The forwarder's subscriptions against a real mosquitto: a retained message
another client published reaches the callback, again after the broker
restarts (sessions are fresh, so every connection subscribes anew); a filter
added while connected works without a reconnect; a refused subscription is
logged once, however often the link comes back."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from daemon_process import wait_for
from edgebox.backoff import Backoff
from edgebox.events import EventBus
from edgebox.mqtt.forwarder import MqttForwarder
from edgebox.mqtt.routing import Router
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.subscriptions import topic_filter_problem
from edgebox.mqtt.topics import Topics
from mosquitto_broker import MosquittoBroker, make_client

QUICK = Backoff(initial_s=0.05, max_s=0.2)


class KeepingMosquitto(MosquittoBroker):
    """A mosquitto that keeps retained messages across a restart, as a real
    deployment's does; with ``subscribe_only_under``, anonymous clients may
    subscribe only to filters under that prefix (mosquitto's dynamic security
    plugin: its plain ``acl_file`` grants every subscription and filters at
    delivery, so no SUBACK ever says no)."""

    def __init__(self, workdir: Path, *, subscribe_only_under: str | None = None) -> None:
        self.subscribe_only_under = subscribe_only_under
        super().__init__(workdir)

    def config_text(self) -> str:
        text = (
            super()
            .config_text()
            .replace("persistence false", f"persistence true\npersistence_location {self.workdir}/")
        )
        if self.subscribe_only_under is None:
            return text
        plugin = next(iter(sorted(Path("/usr/lib").glob("*/mosquitto_dynamic_security.so"))), None)
        if plugin is None:
            pytest.skip("Debian's mosquitto ships mosquitto_dynamic_security.so; not found")
        rules = self.workdir / "dynamic-security.json"
        rules.write_text(json.dumps(_only_under(self.subscribe_only_under)), encoding="utf-8")
        return text + f"plugin {plugin}\nplugin_opt_config_file {rules}\n"


def _only_under(prefix: str) -> dict:
    return {
        "defaultACLAccess": {
            "publishClientSend": True,
            "publishClientReceive": True,
            "subscribe": False,
            "unsubscribe": True,
        },
        "clients": [],
        "groups": [{"groupname": "anonymous", "roles": [{"rolename": "device"}]}],
        "anonymousGroup": "anonymous",
        "roles": [
            {
                "rolename": "device",
                "acls": [{"acltype": "subscribePattern", "topic": f"{prefix}/#", "allow": True}],
            }
        ],
    }


class Received:
    """A callback that only records, as the fleet agent's only enqueues."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self.threads: set[str] = set()

    def __call__(self, payload: bytes) -> None:
        self.threads.add(threading.current_thread().name)
        self.payloads.append(payload)


def publish_retained(broker, topic: str, payload: bytes) -> None:
    client = make_client(broker)
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1, retain=True).wait_for_publish(timeout=10)
    finally:
        client.disconnect()
        client.loop_stop()


@pytest.fixture
def forwarder_for(tmp_path, device_id):
    """``forwarder_for(broker, subscriptions)``: a started forwarder, stopped at teardown."""
    started: list[MqttForwarder] = []

    def start(broker, subscriptions=None) -> MqttForwarder:
        settings = MqttSettings(
            url=broker.url, device_id=device_id, spool_path=tmp_path / "spool.sqlite"
        )
        forwarder = MqttForwarder(
            settings,
            EventBus(),
            Router(Topics("edgebox", device_id), device_id, settings.qos),
            {"device": device_id, "edgebox_version": "test", "started_at": 0.0},
            lambda: {"models": {}, "streams": {}},
            backoff=QUICK,
            backoff_after_up=QUICK,
            connack_timeout_s=0.5,
            subscriptions=subscriptions,
        )
        forwarder.start()
        started.append(forwarder)
        return forwarder

    yield start
    for forwarder in started:
        assert forwarder.stop(5.0)


def test_a_retained_message_reaches_the_callback_on_the_mqtt_thread(
    mosquitto, forwarder_for, device_id
):
    topic = f"edgebox/fleet/{device_id}/desired"
    publish_retained(mosquitto, topic, b"generation 1")
    received = Received()
    forwarder_for(mosquitto, {topic: received})
    wait_for(lambda: received.payloads, what="the retained message")
    assert received.payloads == [b"generation 1"]
    assert received.threads == {"mqtt"}


def test_a_filter_added_while_connected_is_subscribed_without_a_reconnect(
    mosquitto, forwarder_for, device_id, caplog
):
    caplog.set_level(logging.WARNING, logger="edgebox.mqtt")
    forwarder = forwarder_for(mosquitto)
    wait_for(lambda: forwarder.stats().state == "connected", what="the link")
    topic = f"edgebox/fleet/{device_id}/desired"
    publish_retained(mosquitto, topic, b"retained before")
    received = Received()
    forwarder.subscribe(f"edgebox/fleet/{device_id}/+", received)
    wait_for(lambda: received.payloads, what="the retained message")
    publish_retained(mosquitto, topic, b"live")
    wait_for(lambda: len(received.payloads) == 2, what="the live message")
    assert received.payloads == [b"retained before", b"live"]
    assert "lost the connection" not in caplog.text


def test_a_callback_that_raises_is_logged_and_the_link_goes_on(
    mosquitto, forwarder_for, device_id, caplog
):
    topic = f"edgebox/fleet/{device_id}/desired"
    received = Received()

    def failing(payload: bytes) -> None:
        received(payload)
        raise RuntimeError("listener broke")

    forwarder = forwarder_for(mosquitto, {topic: failing})
    wait_for(lambda: forwarder.stats().state == "connected", what="the link")
    publish_retained(mosquitto, topic, b"one")
    publish_retained(mosquitto, topic, b"two")
    wait_for(lambda: len(received.payloads) == 2, what="both messages")
    assert f"the listener of '{topic}' failed on a message" in caplog.text
    assert "lost the connection" not in caplog.text


def test_after_a_broker_restart_the_retained_message_arrives_again(
    tmp_path, forwarder_for, device_id
):
    topic = f"edgebox/fleet/{device_id}/desired"
    with KeepingMosquitto(tmp_path / "broker") as broker:
        publish_retained(broker, topic, b"generation 7")
        received = Received()
        forwarder = forwarder_for(broker, {topic: received})
        wait_for(lambda: received.payloads, what="the retained message")
        broker.stop()
        wait_for(lambda: forwarder.stats().state == "disconnected", what="the link to drop")
        broker.restart()
        wait_for(lambda: len(received.payloads) == 2, what="the retained message again")
    assert received.payloads == [b"generation 7", b"generation 7"]


def test_a_refused_subscription_is_logged_once_with_its_topic(
    tmp_path, forwarder_for, device_id, caplog
):
    caplog.set_level(logging.WARNING, logger="edgebox.mqtt")
    allowed, denied = f"edgebox/fleet/{device_id}/desired", f"elsewhere/{device_id}/desired"
    with KeepingMosquitto(tmp_path / "broker", subscribe_only_under="edgebox") as broker:
        publish_retained(broker, allowed, b"allowed")
        received = Received()
        forwarder = forwarder_for(broker, {denied: received, allowed: received})
        wait_for(lambda: received.payloads, what="the allowed topic's message")
        refusal = f"the broker refused the subscription to '{denied}'"
        wait_for(lambda: refusal in caplog.text, what="the refusal logged")
        broker.stop()
        wait_for(lambda: forwarder.stats().state == "disconnected", what="the link to drop")
        broker.restart()
        wait_for(lambda: len(received.payloads) == 2, what="the second connection's subscriptions")
    assert caplog.text.count(refusal) == 1
    assert "own status" not in caplog.text
    assert received.payloads == [b"allowed", b"allowed"]


@pytest.mark.parametrize("topic", ["", "a/#/b", "a/b#", "a+/b", "a\0b"])
def test_a_filter_mqtt_does_not_allow_is_refused_before_any_connection(
    mosquitto, forwarder_for, topic
):
    forwarder = forwarder_for(mosquitto)
    assert topic_filter_problem(topic) is not None
    with pytest.raises(ValueError, match="expected"):
        forwarder.subscribe(topic, Received())
