"""What the daemon will need from this machine with these settings: its
ports, the disk its MQTT spool lives on, the broker with the configured
credentials, and the model repository."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import threading
import time
from pathlib import Path

from edgebox.lifecycle.check import check_repository
from edgebox.mqtt.connection import login_refused, new_client, open_connection
from edgebox.mqtt.settings import MqttSettings
from edgebox.selftest.report import Check, Status
from edgebox.settings import Settings

SECTION = "this machine"
MQTT_TIMEOUT_S = 5.0
"""The broker's answer to CONNECT, after the TCP connect's own timeout."""


def environment_checks(settings: Settings, daemon_running: bool = False) -> list[Check]:
    """``daemon_running``: the ports are expected to be held (by edgebox)."""
    checks = [_ports(settings, daemon_running), _repository(settings.model_repository)]
    if settings.mqtt is None:
        checks.append(Check(SECTION, "MQTT broker", Status.SKIPPED, "no mqtt: section"))
        checks.append(Check(SECTION, "spool disk", Status.SKIPPED, "no mqtt: section"))
    else:
        checks.append(mqtt_check(settings.mqtt))
        checks.append(_spool_disk(settings.mqtt))
    return checks


def _wanted_ports(settings: Settings) -> list[tuple[str, str, int]]:
    ports = [
        ("HTTP", settings.host, settings.http_port),
        ("gRPC", settings.host, settings.grpc_port),
    ]
    if settings.allow_metrics:
        ports.append(("metrics", settings.metrics_address or settings.host, settings.metrics_port))
    if settings.dashboard.enabled:
        ports.append(("dashboard", settings.host, settings.dashboard.port))
    return [(name, host, port) for name, host, port in ports if port]


def _ports(settings: Settings, daemon_running: bool) -> Check:
    """Each port bound and released again, as the daemon will bind it (no
    SO_REUSEPORT): one another program holds is the finding."""
    busy, free = [], []
    for name, host, port in _wanted_ports(settings):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as error:
                busy.append(f"{name} {host}:{port} ({error.strerror or error})")
                continue
        free.append(f"{name} {port}")
    facts = {"free": free, "in use": busy}
    if not busy:
        return Check(SECTION, "ports", Status.PASS, "free: " + ", ".join(free), facts)
    if daemon_running:
        return Check(SECTION, "ports", Status.PASS, "held by the running daemon", facts)
    return Check(SECTION, "ports", Status.FAIL, "in use: " + "; ".join(busy), facts)


def _repository(repository: Path) -> Check:
    problems = check_repository(repository)
    if not problems:
        return Check(SECTION, "model repository", Status.PASS, str(repository))
    first = problems[0]
    more = f" (and {len(problems) - 1} more: edgebox check)" if len(problems) > 1 else ""
    return Check(
        SECTION,
        "model repository",
        Status.FAIL,
        f"{first}{more}",
        {"problems": [str(p) for p in problems]},
    )


def _spool_disk(mqtt: MqttSettings) -> Check:
    """The spool's folder must hold its cap (``spool_max_mb``) with room to spare."""
    folder = mqtt.resolved_spool_path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free_mb = shutil.disk_usage(folder).free / 2**20
    facts = {"folder": str(folder), "free_mb": round(free_mb), "spool_max_mb": mqtt.spool_max_mb}
    detail = f"{free_mb:,.0f} MB free in {folder}, the spool may take {mqtt.spool_max_mb:g} MB"
    if free_mb < 2 * mqtt.spool_max_mb:
        return Check(SECTION, "spool disk", Status.FAIL, detail, facts)
    return Check(SECTION, "spool disk", Status.PASS, detail, facts)


def mqtt_check(mqtt: MqttSettings, timeout_s: float = MQTT_TIMEOUT_S) -> Check:
    """A CONNECT with the configured URL, TLS files and credentials, under a
    client id of its own so a running daemon's session is left alone."""
    own = dataclasses.replace(mqtt, client_id=f"{mqtt.resolved_client_id}-selftest")
    where = f"{mqtt.parsed_url.host}:{mqtt.parsed_url.port}"
    answered = threading.Event()
    outcome: list = []

    def connack(client, userdata, flags, reason_code, properties) -> None:
        outcome.append(reason_code)
        answered.set()

    try:
        client = new_client(own, None)
        client.on_connect = connack
        open_connection(client, own)
    except (OSError, ValueError) as error:
        return Check(SECTION, "MQTT broker", Status.FAIL, f"{where}: {error}")
    deadline = time.monotonic() + timeout_s
    try:
        while not answered.is_set() and time.monotonic() < deadline:
            client.loop(timeout=0.1)
    finally:
        client.disconnect()
    if not outcome:
        return Check(
            SECTION, "MQTT broker", Status.FAIL, f"{where}: no answer to CONNECT in {timeout_s:g} s"
        )
    code = outcome[0]
    if getattr(code, "is_failure", False):
        why = "the broker refused the login" if login_refused(code) else "refused"
        return Check(SECTION, "MQTT broker", Status.FAIL, f"{where}: {why} ({code})")
    user = f" as {mqtt.username}" if mqtt.username else ""
    return Check(SECTION, "MQTT broker", Status.PASS, f"{where}{user}: connected")
