"""The ``mqtt:`` section of the daemon's settings (docs/configuration.md).

Parsed by ``edgebox/settings/`` like every section: each field coerced to its
type, then ``problems()`` names what is wrong field by field, so startup stops
with the setting, its source and the reason. The password is never held here:
``password_file`` is read when the client connects (and once at startup, to
fail early), and no message or ``repr`` shows its contents.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from edgebox.mqtt.identity import default_device_id

DEFAULT_SPOOL_PATH = Path("/var/lib/edgebox/mqtt/spool.sqlite")
PROTOCOLS = ("5", "3.1.1")
CREDENTIAL_FILES = ("password_file", "ca_file", "cert_file", "key_file")
MIN_SPOOL_MB = 0.25
"""The spool file's smallest workable size: a few pages for its tables and
its journal's reserve (spool_file.py)."""
_DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883, "ws": 80, "wss": 443}
_DEFAULT_WS_PATH = "/mqtt"
_TOPIC_LEVEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_NOT_IN_TOPICS = ("+", "#", "\0")


class BrokerUrl(NamedTuple):
    """``url`` taken apart, defaults filled in, as paho's ``connect`` takes it."""

    scheme: str
    host: str
    port: int
    path: str
    """The websocket path (``/mqtt`` unless the URL names one); empty for TCP."""
    tls: bool
    transport: str
    """paho's transport: ``tcp`` or ``websockets``."""


@dataclasses.dataclass(frozen=True)
class MqttSettings:
    """Where and how results, status and events are published; absent from
    the settings means no MQTT at all (see docs/mqtt.md)."""

    url: str = "mqtt://127.0.0.1:1883"
    """The broker: ``mqtt://HOST:PORT``, ``mqtts://`` (TLS), ``ws://`` or
    ``wss://`` (websockets, optionally with a path, ``/mqtt`` by default).
    Ports default to 1883, 8883, 80 and 443. No credentials in the URL: use
    ``username`` and ``password_file``."""
    client_id: str = dataclasses.field(default="", metadata={"default_help": "edgebox-DEVICE_ID"})
    """The MQTT client identifier; empty: ``edgebox-<device_id>``."""
    username: str = ""
    """User name sent to the broker; empty: none."""
    password_file: Path | None = None
    """A file holding the password on one line (surrounding blanks dropped);
    read at start, so an unreadable file stops startup. Needs ``username``."""
    ca_file: Path | None = None
    """CA certificates (PEM) the broker's certificate is checked against, with
    ``mqtts://`` or ``wss://``; none: the system's."""
    cert_file: Path | None = None
    """Client certificate (PEM) for brokers that ask for one; with ``key_file``."""
    key_file: Path | None = None
    """The client certificate's private key (PEM); with ``cert_file``."""
    protocol: str = "5"
    """MQTT version: ``5`` or ``3.1.1``."""
    keepalive: int = 30
    """Seconds between keep-alive pings when idle (5..3600); the broker drops
    the link, and publishes the last will, after 1.5 times this."""
    qos: int = 1
    """QoS of results and events (0, 1 or 2). With 0 nothing is acknowledged,
    so a message leaves the spool once written to the socket."""
    topic_prefix: str = "edgebox"
    """First topic levels: ``{topic_prefix}/{device_id}/...``. No ``+``,
    ``#``, leading ``$`` or leading or trailing ``/``."""
    device_id: str = dataclasses.field(
        default="", metadata={"default_help": "the hostname and 8 hex digits unique to the machine"}
    )
    """This device's topic level; empty: the hostname (characters other than
    letters, digits, ``_``, ``.`` and ``-`` replaced by ``-``) and eight hex
    digits unique to the machine, e.g. ``orin-07-3f2a9c1b``, so that devices
    flashed from one image never share an id (edgebox/mqtt/identity.py)."""
    spool_path: Path | None = dataclasses.field(
        default=None, metadata={"default_help": str(DEFAULT_SPOOL_PATH)}
    )
    """SQLite file holding unsent messages across restarts; none:
    ``/var/lib/edgebox/mqtt/spool.sqlite``."""
    spool_max_mb: float = 64
    """Most megabytes the spool holds, its files on disk included (at least
    0.25); past it the oldest results go first."""
    spool_write_delay_s: float = 1.0
    """Seconds a message may wait for the broker's acknowledgement before it
    is written to the spool file (0..60): a healthy link writes nothing, and a
    power cut or ``kill -9`` loses at most this much unacknowledged. 0:
    every message is written within 25 ms, whatever the broker does."""
    queue_events: int = 10000
    """Messages waiting between the publishing threads and the MQTT thread
    (at least 100); past it the oldest are dropped (whatever their kind) and counted."""
    max_inflight: int = 20
    """Messages sent and not yet acknowledged at once (1..1000)."""

    @property
    def parsed_url(self) -> BrokerUrl:
        """Raises ValueError (whose text never repeats credentials) when
        ``url`` is not a broker URL; ``problems()`` reports it at startup."""
        return parse_broker_url(self.url)

    @property
    def resolved_device_id(self) -> str:
        return self.device_id or default_device_id()

    @property
    def resolved_client_id(self) -> str:
        return self.client_id or f"edgebox-{self.resolved_device_id}"

    @property
    def resolved_spool_path(self) -> Path:
        return self.spool_path or DEFAULT_SPOOL_PATH

    def password(self) -> str | None:
        """The password from ``password_file`` (None without one), read now.
        Raises ValueError naming the file, never quoting it."""
        if self.password_file is None:
            return None
        try:
            text = self.password_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read '{self.password_file}': {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ValueError(f"'{self.password_file}' is not UTF-8 text") from None
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise ValueError(f"'{self.password_file}' is empty")
        if len(lines) > 1:
            raise ValueError(
                f"'{self.password_file}' holds {len(lines)} lines; expected the password "
                "on one line"
            )
        return lines[0].strip()

    def file_digests(self) -> dict[str, str | None]:
        """The SHA-256 of each file the connection reads (password, CA,
        certificate, key), None for one unset or unreadable: a reload that
        names the same paths may still bring a fixed password."""
        digests: dict[str, str | None] = {}
        for key in CREDENTIAL_FILES:
            path = getattr(self, key)
            try:
                digests[key] = (
                    None if path is None else hashlib.sha256(path.read_bytes()).hexdigest()
                )
            except OSError:
                digests[key] = None
        return digests

    def problems(self) -> Iterator[tuple[str, str]]:
        """Each ``(field, message)`` wrong with these settings, checked at
        startup by the loader in ``edgebox/settings/`` (which reads the files
        named here)."""
        try:
            url = self.parsed_url
        except ValueError as exc:
            yield "url", str(exc)
            url = None
        if "\0" in self.client_id:
            yield "client_id", "must not hold a NUL character"
        if self.password_file is not None:
            if not self.username:
                yield "password_file", "needs username too"
            try:
                self.password()
            except ValueError as exc:
                yield "password_file", str(exc)
        for key in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, key)
            if path is None:
                continue
            if url is not None and not url.tls:
                yield key, f"needs an mqtts:// or wss:// url, got {url.scheme}://"
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                yield key, f"cannot read '{path}': {exc.strerror}"
        if (self.cert_file is None) != (self.key_file is None):
            given, missing = (
                ("cert_file", "key_file") if self.key_file is None else ("key_file", "cert_file")
            )
            yield given, f"needs {missing} too (a client certificate goes with its key)"
        if self.protocol not in PROTOCOLS:
            yield "protocol", f"expected '5' or '3.1.1', got {self.protocol!r}"
        if not 5 <= self.keepalive <= 3600:
            yield "keepalive", f"expected 5..3600 seconds, got {self.keepalive}"
        if self.qos not in (0, 1, 2):
            yield "qos", f"expected 0, 1 or 2, got {self.qos}"
        problem = topic_prefix_problem(self.topic_prefix)
        if problem:
            yield "topic_prefix", problem
        if self.device_id and (problem := topic_level_problem(self.device_id)):
            yield "device_id", problem
        if not self.spool_max_mb >= MIN_SPOOL_MB:
            yield "spool_max_mb", f"expected a number >= {MIN_SPOOL_MB}, got {self.spool_max_mb}"
        if not 0 <= self.spool_write_delay_s <= 60:
            yield (
                "spool_write_delay_s",
                f"expected 0..60 seconds, got {self.spool_write_delay_s}",
            )
        if self.queue_events < 100:
            yield "queue_events", f"expected an integer >= 100, got {self.queue_events}"
        if not 1 <= self.max_inflight <= 1000:
            yield "max_inflight", f"expected 1..1000, got {self.max_inflight}"


def parse_broker_url(text: str) -> BrokerUrl:
    expected = "expected mqtt://HOST[:PORT], mqtts://, ws:// or wss://"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError(f"{expected}, got a URL whose port is not 1..65535") from None
    if parts.username is not None or parts.password is not None:
        # The text is not repeated: it holds a password.
        raise ValueError("must not hold credentials; use username and password_file")
    if parts.scheme not in _DEFAULT_PORTS:
        raise ValueError(f"{expected}, got {text!r}")
    if not parts.hostname:
        raise ValueError(f"{expected}, got {text!r} (no host)")
    if port == 0:
        raise ValueError(f"{expected}, got a URL whose port is not 1..65535")
    websockets = parts.scheme in ("ws", "wss")
    if parts.query or parts.fragment or (not websockets and parts.path not in ("", "/")):
        raise ValueError(f"{expected} (a path only with ws:// or wss://), got {text!r}")
    return BrokerUrl(
        scheme=parts.scheme,
        host=parts.hostname,
        port=port or _DEFAULT_PORTS[parts.scheme],
        path=(parts.path or _DEFAULT_WS_PATH) if websockets else "",
        tls=parts.scheme in ("mqtts", "wss"),
        transport="websockets" if websockets else "tcp",
    )


def topic_prefix_problem(prefix: str) -> str | None:
    if (
        not prefix
        or prefix.startswith(("/", "$"))
        or prefix.endswith("/")
        or any(c in prefix for c in _NOT_IN_TOPICS)
    ):
        return (
            "expected topic levels without '+', '#' or NUL, not starting with '/' or '$' "
            f"nor ending with '/', got {prefix!r}"
        )
    return None


def topic_level_problem(name: str) -> str | None:
    """What keeps ``name`` from being one topic level that every broker and
    every subscriber's wildcard take as written (a device id, a fleet group),
    or None."""
    if _TOPIC_LEVEL.fullmatch(name):
        return None
    return (
        "expected 1-64 letters, digits, '_', '.' or '-' (starting with a letter or "
        f"digit), got {name!r}"
    )
