"""The simulation itself, before any scenario relies on it: every device
reaches the main broker (through the bridge for the site's), the bridge
carries retained messages both ways and comes back after the main broker
restarts, the artifact server serves files and counts them, and Prometheus
finds every device through file-based service discovery. One fleet for the
module; the tests run in order and leave every device running."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

from daemon_process import wait_for
from fleet_sim.fleet import Fleet
from fleet_sim.models import MODEL
from mosquitto_broker import Subscriber, make_client

STATUSES = "edgebox/+/status"


def _publish_retained(broker, topic: str, payload: bytes) -> None:
    client = make_client(broker)
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1, retain=True).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


def _latest_statuses(subscriber: Subscriber) -> dict[str, dict]:
    latest = {}
    for message in subscriber.messages(STATUSES):
        if message.payload:
            latest[message.topic.split("/")[1]] = json.loads(message.payload)
    return latest


def _serving(status: dict) -> bool:
    """Online with ``lane`` version 1 ready (the first status of a connection
    may come before the repository's first load)."""
    return status.get("state") == "online" and status.get("models", {}).get(MODEL) == {
        "ready_versions": ["1"]
    }


def _wait_statuses(subscriber: Subscriber, wanted, what: str, timeout_s: float = 30) -> dict:
    """Wait until ``wanted(statuses by device)`` holds; returns the statuses."""
    return subscriber.wait_for(
        lambda _: (lambda s: s if wanted(s) else None)(_latest_statuses(subscriber)),
        timeout_s=timeout_s,
        what=what,
    )


def test_every_device_is_online_on_the_main_broker(fleet: Fleet):
    ids = {d.device_id for d in fleet.devices}
    assert len(fleet.site) == 2
    assert all(d.broker_url == fleet.brokers.site.url for d in fleet.site)
    with Subscriber(fleet.brokers.main, STATUSES) as main:
        statuses = _wait_statuses(
            main,
            lambda s: {d for d, status in s.items() if _serving(status)} >= ids,
            "every device's online status, serving lane 1, on the main broker",
        )
    assert {statuses[d]["device"] for d in ids} == ids


def _assert_bridged_and_retained(source, target, topic: str, payload: bytes) -> None:
    """``payload`` published retained on ``source`` reaches ``target``, where a
    client subscribing afterwards gets it as a retained message."""
    with Subscriber(target, topic) as watching:
        _publish_retained(source, topic, payload)
        watching.wait_for(
            lambda ms: any(m.payload == payload for m in ms),
            what=f"'{topic}' from {source.url} on {target.url}",
        )
    with Subscriber(target, topic) as late:
        late.wait_for(lambda ms: ms, what=f"the retained '{topic}' on {target.url}")
        assert [(m.payload, m.retain) for m in late.messages()] == [(payload, True)]


def test_bridge_carries_retained_messages_both_ways(fleet: Fleet):
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    down, up = f"edgebox/fleet/{probe}/desired", f"edgebox/{probe}/status"
    try:
        _assert_bridged_and_retained(fleet.brokers.main, fleet.brokers.site, down, b"from main")
        _assert_bridged_and_retained(fleet.brokers.site, fleet.brokers.main, up, b"from site")
    finally:
        _publish_retained(fleet.brokers.main, down, b"")
        _publish_retained(fleet.brokers.site, up, b"")


def test_artifact_server_serves_a_file_and_counts_its_bytes(fleet: Fleet):
    content = uuid.uuid4().bytes * 1000
    (fleet.artifacts.root / "probe.bin").write_bytes(content)
    with urllib.request.urlopen(fleet.artifacts.url("probe.bin"), timeout=10) as reply:
        assert reply.read() == content
    # Counted on the server's thread once written, which may be after the client has read it all.
    wait_for(
        lambda: fleet.artifacts.bytes_sent("probe.bin") == len(content),
        10,
        what=f"{len(content)} bytes counted for probe.bin",
    )


def test_prometheus_sees_every_device_through_file_discovery(fleet: Fleet, prometheus):
    everyone = {d.device_id: 1.0 for d in fleet.devices}
    wait_for(
        lambda: prometheus.by_device('up{job="edgebox"}') == everyone,
        30,
        what=f"up == 1 for {sorted(everyone)} in prometheus ({prometheus.targets_path})",
    )
    wait_for(
        lambda: prometheus.by_device("edgebox_mqtt_connected") == everyone,
        30,
        what="edgebox_mqtt_connected == 1 for every device in prometheus",
    )


DEVICE_RSS_BUDGET_MB = 200
"""A device daemon serving one small python model stays well under this
(about 80 MB measured); 20 of them must fit a CI machine."""


def test_fleet_footprint_is_within_budget(fleet: Fleet, capsys):
    footprint = fleet.footprint()
    with capsys.disabled():
        print(f"\nfleet footprint: {footprint.line()}")
    assert footprint.devices == fleet.size
    assert footprint.rss_max_mb < DEVICE_RSS_BUDGET_MB
    assert footprint.idle_cpu_percent < 10 * fleet.size


def test_stopped_device_is_offline_and_comes_back_with_its_repository(fleet: Fleet):
    device = fleet.site[-1]
    with Subscriber(fleet.brokers.main, STATUSES) as main:
        fleet.stop_device(device)
        _wait_statuses(
            main,
            lambda s: s.get(device.device_id, {}).get("state") == "offline",
            f"{device.device_id}'s offline status on the main broker",
        )
        assert device.status_topic == f"edgebox/{device.device_id}/status"
        stopped_at = time.time()
        fleet.start_device(device)
        statuses = _wait_statuses(
            main,
            lambda s: (
                _serving(s[device.device_id]) and s[device.device_id]["timestamp"] > stopped_at
            ),
            f"{device.device_id} online again, serving lane 1 from the same repository",
        )
    assert device.starts == 2
    assert statuses[device.device_id]["started_at"] > stopped_at


def test_restarted_device_is_scraped_on_its_new_port(fleet: Fleet, prometheus):
    device = fleet.site[-1]
    assert json.loads(prometheus.targets_path.read_text())[-1]["targets"] == [device.metrics_target]
    wait_for(
        lambda: (
            prometheus.by_device(f'up{{device="{device.device_id}"}}') == {device.device_id: 1.0}
        ),
        30,
        what=f"{device.device_id} up again in prometheus at {device.metrics_target}",
    )


def test_devices_and_bridge_come_back_after_the_main_broker_restarts(fleet: Fleet):
    direct = {d.device_id for d in fleet.devices} - {d.device_id for d in fleet.site}
    restarted_at = time.time()
    fleet.brokers.restart_main()
    with Subscriber(fleet.brokers.main, STATUSES) as main:
        _wait_statuses(
            main,
            lambda s: all(
                s.get(d, {}).get("state") == "online" and s[d]["timestamp"] > restarted_at
                for d in direct
            ),
            f"{sorted(direct)} online again, after the restart",
        )
        statuses = _latest_statuses(main)
    assert {d.device_id for d in fleet.devices} <= set(statuses)
    test_bridge_carries_retained_messages_both_ways(fleet)
