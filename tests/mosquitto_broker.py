"""A real mosquitto for the tests, and what talks to it.

- ``MosquittoBroker``: scripts/demo_broker.py's ``LocalMosquitto`` (one copy of
  the config, port and start logic) plus, with ``tls=True``, a CA, a server
  certificate for 127.0.0.1 and a client certificate made with the ``openssl``
  CLI in the work folder; the TLS listener requires the client certificate.
- ``Subscriber``: a paho-mqtt 2.x client on its own network thread that
  records every message it receives.
- ``SharedBroker``: the session's mosquitto as one test sees it, which it
  may not stop, restart or kill.
- ``SilentBroker``: a TCP listener that accepts and never answers, the broker
  that hangs a client in CONNECT.
- ``daemon_mqtt_flags``: the daemon's flags for publishing to a broker.

Everything binds 127.0.0.1 only and waits against deadlines, never sleeps.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon_process import wait_for
from scripts.demo_broker import BrokerTls, LocalMosquitto, mosquitto_installed

__all__ = [
    "MosquittoBroker",
    "ReceivedMessage",
    "SharedBroker",
    "SilentBroker",
    "Subscriber",
    "daemon_mqtt_flags",
    "mosquitto_installed",
]

_CERT_DAYS = "2"

_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
"""


class MosquittoBroker(LocalMosquitto):
    """A mosquitto on a free 127.0.0.1 port, configured by the test.

    ``tls=True``: ``mqtts://`` with ``ca_file``, ``client_cert_file`` and
    ``client_key_file`` for clients; a client without that certificate is
    refused in the TLS handshake. ``users``: name -> password, anonymous off."""

    def __init__(
        self, workdir: Path, *, tls: bool = False, users: dict[str, str] | None = None
    ) -> None:
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.ca_file: Path | None = None
        self.client_cert_file: Path | None = None
        self.client_key_file: Path | None = None
        broker_tls = self._make_certificates(workdir / "tls") if tls else None
        super().__init__(workdir, tls=broker_tls, users=users)

    def __enter__(self) -> MosquittoBroker:
        self.start()
        return self

    def _make_certificates(self, folder: Path) -> BrokerTls:
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "openssl.cnf"
        config.write_text(_OPENSSL_CONFIG)
        ca_key, ca_cert = folder / "ca.key", folder / "ca.crt"
        _openssl(
            "req", "-x509", "-config", config, "-extensions", "ca",
            "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", ca_key, "-out", ca_cert, "-days", _CERT_DAYS,
            "-subj", "/CN=edgebox test CA",
        )  # fmt: skip
        server_key, server_cert = self._signed_pair(
            folder, config, "server", "/CN=127.0.0.1", ca_cert, ca_key
        )
        client_key, client_cert = self._signed_pair(
            folder, config, "client", "/CN=edgebox-test-client", ca_cert, ca_key
        )
        self.ca_file = ca_cert
        self.client_cert_file = client_cert
        self.client_key_file = client_key
        return BrokerTls(ca_file=ca_cert, cert_file=server_cert, key_file=server_key)

    @staticmethod
    def _signed_pair(
        folder: Path, config: Path, role: str, subject: str, ca_cert: Path, ca_key: Path
    ) -> tuple[Path, Path]:
        key, request, cert = folder / f"{role}.key", folder / f"{role}.csr", folder / f"{role}.crt"
        _openssl(
            "req", "-new", "-config", config,
            "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", request, "-subj", subject,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", request, "-CA", ca_cert, "-CAkey", ca_key,
            "-set_serial", str(uuid.uuid4().int >> 64), "-days", _CERT_DAYS,
            "-extfile", config, "-extensions", role, "-out", cert,
        )  # fmt: skip
        return key, cert


class SharedBroker:
    """The session's broker, handed to one test: everything a ``MosquittoBroker``
    offers but stopping it, restarting it or killing it, which would pull it
    from under the tests after this one. A test that does that is marked
    ``@pytest.mark.private_broker`` and gets a mosquitto of its own."""

    def __init__(self, broker: MosquittoBroker) -> None:
        self._broker = broker

    def __getattr__(self, name: str):
        if name in ("stop", "restart", "kill", "start"):
            raise AttributeError(
                f"'{name}' on the session's shared mosquitto: mark the test "
                "@pytest.mark.private_broker to get a broker of its own"
            )
        return getattr(self._broker, name)


def daemon_mqtt_flags(url: str, device_id: str, spool: Path) -> list[str]:
    """``edgebox serve`` flags publishing to ``url`` as ``device_id``, spooling in ``spool``."""
    return ["--mqtt-url", url, "--mqtt-device-id", device_id, "--mqtt-spool-path", str(spool)]


def _openssl(*args: object) -> None:
    result = subprocess.run(
        ["openssl", *map(str, args)], capture_output=True, text=True, timeout=30
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({result.returncode}):\n{result.stderr}")


class ReceivedMessage(NamedTuple):
    topic: str
    payload: bytes
    retain: bool


class Subscriber:
    """A paho client that subscribes to ``topic_filter`` and records every
    message, on paho's network thread; the lists handed out are copies.

    ``connect()`` returns once the broker acknowledged the subscription, so a
    message published after it is seen. A refused connect raises
    ``AssertionError`` with paho's reason string."""

    def __init__(
        self,
        broker: LocalMosquitto,
        topic_filter: str = "#",
        *,
        protocol: int = mqtt.MQTTv5,
        username: str | None = None,
        password: str | None = None,
        client_cert: bool = True,
        qos: int = 1,
    ) -> None:
        self.topic_filter = topic_filter
        self.qos = qos
        self._broker = broker
        self._lock = threading.Lock()
        self._messages: list[ReceivedMessage] = []
        self._connack: list[mqtt.ReasonCode] = []
        self._subscribed = threading.Event()
        self.client = make_client(
            broker,
            protocol=protocol,
            username=username,
            password=password,
            client_cert=client_cert,
        )
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message

    def connect(self, timeout_s: float = 10.0) -> Subscriber:
        self.client.connect("127.0.0.1", self._broker.port, keepalive=30)
        self.client.loop_start()
        wait_for(lambda: self._connack, timeout_s, what=f"CONNACK from {self._broker.url}")
        if self._connack[0].is_failure:
            raise AssertionError(f"broker {self._broker.url} refused: {self._connack[0]}")
        wait_for(self._subscribed.is_set, timeout_s, what=f"SUBACK for '{self.topic_filter}'")
        return self

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def __enter__(self) -> Subscriber:
        return self.connect()

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.close()

    def messages(self, topic_filter: str = "#") -> list[ReceivedMessage]:
        with self._lock:
            return [m for m in self._messages if mqtt.topic_matches_sub(topic_filter, m.topic)]

    def wait_for(
        self,
        predicate: Callable[[list[ReceivedMessage]], object],
        timeout_s: float = 10.0,
        what: str = "messages",
    ):
        """Poll ``predicate(messages so far)`` until truthy; returns its value."""
        return wait_for(lambda: predicate(self.messages()), timeout_s, what=what)

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        self._connack.append(reason_code)
        if not reason_code.is_failure:
            client.subscribe(self.topic_filter, qos=self.qos)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        self._subscribed.set()

    def _on_message(self, client, userdata, message) -> None:
        with self._lock:
            self._messages.append(
                ReceivedMessage(message.topic, bytes(message.payload), bool(message.retain))
            )


def make_client(
    broker: LocalMosquitto,
    *,
    protocol: int = mqtt.MQTTv5,
    username: str | None = None,
    password: str | None = None,
    client_cert: bool = True,
    client_id: str | None = None,
) -> mqtt.Client:
    """A paho 2.x client set up for ``broker`` (TLS files, credentials), not
    yet connected."""
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id or f"test-{uuid.uuid4().hex[:12]}",
        protocol=protocol,
    )
    if username is not None:
        client.username_pw_set(username, password)
    if broker.tls is not None:
        ca_file = getattr(broker, "ca_file", None) or broker.tls.ca_file
        if client_cert:
            client.tls_set(
                ca_certs=str(ca_file),
                certfile=str(broker.client_cert_file),
                keyfile=str(broker.client_key_file),
            )
        else:
            client.tls_set(ca_certs=str(ca_file))
    return client


class SilentBroker:
    """Accepts TCP connections on a free 127.0.0.1 port and never sends a
    byte: a client waiting for CONNACK waits forever. One accept thread,
    bounded by ``stop()``, which also closes every accepted socket."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept_loop, name="silent-broker", daemon=True)

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    @property
    def accepted(self) -> int:
        with self._lock:
            return len(self._accepted)

    def start(self) -> SilentBroker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self._listener.close()
        with self._lock:
            for connection in self._accepted:
                connection.close()
            self._accepted.clear()

    def __enter__(self) -> SilentBroker:
        return self.start()

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._accepted.append(connection)
