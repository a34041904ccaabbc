"""The metrics server answers ``GET /metrics`` from its own registry on its
own port, and gives the port back when stopped."""

from __future__ import annotations

import http.client
import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from edgebox.backends.python import custom_metrics as custom
from edgebox.events import EventBus, ModelStateChanged
from edgebox.metrics.collector import MetricsCollector
from edgebox.metrics.server import MetricsServer


def test_serves_the_collector_alone_and_frees_its_port_when_stopped():
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged, max_events=1)
    for version in range(2):
        bus.publish(ModelStateChanged("m", version, "READY", ""))
    server = MetricsServer(MetricsCollector(None, bus=bus), "127.0.0.1", 0)
    port = server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert reply.status == 200
            text = reply.read().decode()
    finally:
        server.stop()
    subscription.close()

    families = {f.name: f for f in text_string_to_metric_families(text)}
    # Only edgebox's collector: no process_*/python_* from the global registry.
    assert list(families) == ["edgebox_event_drops"]
    assert families["edgebox_event_drops"].samples[0].value == 1
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_port_in_use_raises_oserror():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = MetricsServer(MetricsCollector(None), "127.0.0.1", taken.getsockname()[1])
        with pytest.raises(OSError):
            server.start()
    server.stop()


def test_idle_connections_do_not_keep_a_scrape_waiting():
    server = MetricsServer(MetricsCollector(None, bus=EventBus()), "127.0.0.1", 0)
    port = server.start()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(64)]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert reply.status == 200
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_triton_style_counters_are_declared_counter_under_their_own_names():
    # python_backend's custom_metrics example checks for these very lines, and
    # Triton declares its nv_inference_* counters the same way (no `_total`).
    registry = custom.CustomMetricRegistry()
    family = registry.family("probe_latency_ns", "Cumulative time", custom.COUNTER)
    _, series = registry.series(family, {"model": "probe", "version": "1"}, None)
    custom.increment(family, series, 5)
    server = MetricsServer(MetricsCollector(None, custom=registry), "127.0.0.1", 0)
    port = server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            content_type = reply.headers["Content-Type"]
            lines = reply.read().decode().splitlines()
    finally:
        server.stop()
    assert content_type.startswith("text/plain; version=0.0.4")
    assert lines == [
        "# HELP probe_latency_ns Cumulative time",
        "# TYPE probe_latency_ns counter",
        'probe_latency_ns{model="probe",version="1"} 5.0',
    ]


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "/", "/metricsx", "/metrics/", "/v2/metrics", "/api/v1"]
)
def test_any_path_but_metrics_is_404(path):
    server = MetricsServer(MetricsCollector(None, bus=EventBus()), "127.0.0.1", 0)
    port = server.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", path)
        reply = connection.getresponse()
        status, body = reply.status, reply.read()
        connection.close()
    finally:
        server.stop()
    assert (status, body) == (404, b"not found: this port serves only /metrics\n")


@pytest.mark.parametrize("query", ["", "?name[]=edgebox_event_drops", "?format=prometheus"])
def test_metrics_answers_with_any_query_string(query):
    server = MetricsServer(MetricsCollector(None, bus=EventBus()), "127.0.0.1", 0)
    port = server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics{query}", timeout=5) as reply:
            status, text = reply.status, reply.read().decode()
    finally:
        server.stop()
    assert status == 200
    assert "# TYPE edgebox_event_drops" in text
