"""The test broker itself: a real mosquitto configured by the test (plain,
TLS with a client certificate, username/password), its restart on the same
port, and the silent broker that accepts TCP and never answers."""

from __future__ import annotations

import socket

import paho.mqtt.client as mqtt
import pytest

from daemon_process import wait_for
from mosquitto_broker import MosquittoBroker, ReceivedMessage, SilentBroker, Subscriber, make_client


def _publish(broker: MosquittoBroker, topic: str, payload: bytes, retain: bool = False) -> None:
    client = make_client(broker)
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


def test_plain_broker_round_trip(mosquitto, device_id):
    status = f"edgebox/{device_id}/status"
    assert mosquitto.url == f"mqtt://127.0.0.1:{mosquitto.port}"
    with Subscriber(mosquitto, f"edgebox/{device_id}/#") as subscriber:
        _publish(mosquitto, status, b"online", retain=True)
        _publish(mosquitto, "other/topic", b"ignored")
        subscriber.wait_for(lambda messages: messages, what=status)
        assert subscriber.messages() == [ReceivedMessage(status, b"online", False)]
    with Subscriber(mosquitto, f"+/{device_id}/status") as late:
        late.wait_for(lambda messages: messages, what="the retained status")
        assert late.messages("edgebox/#") == [ReceivedMessage(status, b"online", True)]


def test_tls_broker_round_trip_with_client_certificate(tmp_path):
    with MosquittoBroker(tmp_path, tls=True) as broker:
        assert broker.url == f"mqtts://127.0.0.1:{broker.port}"
        assert "require_certificate true" in broker.config_path.read_text()
        with Subscriber(broker, "t/#") as subscriber:
            _publish(broker, "t/1", b"secret")
            subscriber.wait_for(lambda messages: messages, what="t/1 over TLS")
            assert subscriber.messages() == [ReceivedMessage("t/1", b"secret", False)]


def test_tls_broker_refuses_client_without_certificate(tmp_path):
    with MosquittoBroker(tmp_path, tls=True) as broker:
        client = make_client(broker, client_cert=False)
        connacks, disconnects = [], []
        client.on_connect = lambda c, u, flags, reason, props: connacks.append(reason)
        client.on_disconnect = lambda c, u, flags, reason, props: disconnects.append(reason)
        try:
            client.connect("127.0.0.1", broker.port)
            client.loop_start()
            wait_for(lambda: disconnects, 10, what="the broker to drop the client")
        finally:
            client.loop_stop()
        assert connacks == []
        wait_for(
            lambda: "peer did not return a certificate" in broker.log_text(),
            10,
            what="the broker's log of the refused handshake",
        )


@pytest.mark.parametrize("protocol", [mqtt.MQTTv5, mqtt.MQTTv311], ids=["mqtt5", "mqtt311"])
def test_users_right_password_connects_wrong_is_not_authorized(tmp_path, protocol):
    with MosquittoBroker(tmp_path, users={"edge": "right"}) as broker:
        assert "allow_anonymous false" in broker.config_path.read_text()
        with Subscriber(broker, protocol=protocol, username="edge", password="right"):
            pass
        # mosquitto 2.0 answers "Not authorized" (MQTT 5: 0x87, 3.1.1: 5)
        # for a wrong password, not "Bad user name or password".
        with pytest.raises(AssertionError, match=r"refused: Not authorized$"):
            Subscriber(broker, protocol=protocol, username="edge", password="wrong").connect()
        with pytest.raises(AssertionError, match=r"refused: Not authorized$"):
            Subscriber(broker, protocol=protocol).connect()


@pytest.mark.private_broker
def test_restart_keeps_the_port_and_kill_closes_it(mosquitto):
    port = mosquitto.port
    with Subscriber(mosquitto, "#"):
        mosquitto.restart()
    assert mosquitto.port == port
    with Subscriber(mosquitto, "a") as subscriber:
        _publish(mosquitto, "a", b"after restart")
        subscriber.wait_for(lambda messages: messages, what="a message after restart")
    mosquitto.kill()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert mosquitto.log_text().count("running") == 2


def test_silent_broker_accepts_tcp_and_sends_nothing():
    with SilentBroker() as silent:
        assert silent.url == f"mqtt://127.0.0.1:{silent.port}"
        with socket.create_connection(("127.0.0.1", silent.port), timeout=2) as connection:
            # A CONNECT packet (MQTT 3.1.1, client id "x") that gets no CONNACK.
            connection.sendall(bytes.fromhex("100d00044d5154540402003c000178"))
            wait_for(lambda: silent.accepted == 1, 5, what="the silent broker to accept")
            connection.settimeout(0.3)
            with pytest.raises(TimeoutError):
                connection.recv(1)
            silent.stop()
            connection.settimeout(5)
            # Closing a socket with our CONNECT still unread sends a reset.
            with pytest.raises(ConnectionResetError):
                connection.recv(1)
