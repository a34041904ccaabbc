"""One paho-mqtt client per connection attempt, configured from the
``mqtt:`` settings.

A fresh client each time, never paho's own ``reconnect``: paho would re-send
the messages it still holds while the forwarder re-sends the same rows from
the spool, and the spool is the one source of truth for what is unsent.
"""

from __future__ import annotations

from dataclasses import dataclass

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edgebox.mqtt.settings import MqttSettings

CONNECT_TIMEOUT_S = 5.0
"""For the TCP (and TLS) connect itself; the CONNACK has its own deadline."""

_REFUSED_LOGIN = {134, 135, 140}
"""CONNACK reason codes that retrying soon cannot fix: bad user name or
password, not authorized, bad authentication method (MQTT 3.1.1's 4 and 5
arrive here as 134 and 135)."""


@dataclass(frozen=True)
class LastWill:
    topic: str
    payload: bytes
    qos: int


def new_client(settings: MqttSettings, will: LastWill | None) -> mqtt.Client:
    """A client ready for ``open_connection``; nothing is sent yet."""
    url = settings.parsed_url
    protocol = mqtt.MQTTv5 if settings.protocol == "5" else mqtt.MQTTv311
    client = mqtt.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=settings.resolved_client_id,
        protocol=protocol,
        transport=url.transport,
        reconnect_on_failure=False,
    )
    client.connect_timeout = CONNECT_TIMEOUT_S
    client.max_inflight_messages_set(settings.max_inflight)
    client.max_queued_messages_set(0)
    if url.transport == "websockets" and url.path:
        client.ws_set_options(path=url.path)
    if url.tls:
        client.tls_set(
            ca_certs=_text(settings.ca_file),
            certfile=_text(settings.cert_file),
            keyfile=_text(settings.key_file),
        )
    if settings.username:
        client.username_pw_set(settings.username, settings.password())
    if will is not None:
        client.will_set(will.topic, will.payload, qos=will.qos, retain=True)
    return client


def open_connection(client: mqtt.Client, settings: MqttSettings) -> None:
    """Connect the socket and send CONNECT; the answer arrives in ``loop``.
    Raises OSError (refused, unreachable, TLS) or ValueError."""
    url = settings.parsed_url
    result = client.connect(url.host, url.port, keepalive=settings.keepalive)
    if result != mqtt.MQTT_ERR_SUCCESS:
        raise OSError(f"cannot connect: {mqtt.error_string(result)}")


def login_refused(reason_code) -> bool:
    """True when the broker refused the credentials themselves."""
    return getattr(reason_code, "value", reason_code) in _REFUSED_LOGIN


def _text(path) -> str | None:
    return None if path is None else str(path)
