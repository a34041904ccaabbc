"""The issue's fleet scenarios, end to end: the operator's real ``edgebox
fleet`` commands against N real daemons with their fleet agents, two of them
behind a site broker bridged to the main one, artifacts from a real HTTP
server, and Prometheus watching. They run in order on one fleet, each deploy
a new version of ``lane``, as an operator's day would go:

1. deploy in waves 1, 50%, 100% to every device (and how long it took,
   how many bytes moved);
2. a device stopped during a deploy converges once it starts again;
3. the main broker restarts mid-deploy and the deploy still completes;
4. a tampered artifact changes nothing and is reported;
5. a version that fails its rollout gate on the first wave halts the deploy
   and the other devices never see it;
6. a rollback returns every device to the version before (4: the two
   halted deploys never reached the group);
7. a document signed with an untrusted key changes nothing and is
   reported (last: it stays the retained document, which the devices keep
   refusing).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from daemon_process import wait_for
from edgebox.fleet.artifacts import pack
from edgebox.fleet.signing import generate_key
from fleet_sim.device import FleetSection
from fleet_sim.models import MODEL, write_lane_version
from fleet_sim.test_harness import DEVICE_RSS_BUDGET_MB
from mosquitto_broker import Subscriber

GROUP = "line-3"
WAIT_S = 180


@pytest.fixture(scope="module")
def fleet_section(fleet_key):
    return lambda device_id: FleetSection(GROUP, (fleet_key.public,))


@pytest.fixture(scope="module")
def reports(fleet):
    with Subscriber(fleet.brokers.main, "edgebox/+/fleet") as subscriber:
        yield subscriber


def latest(reports: Subscriber) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for message in reports.messages():
        report = json.loads(message.payload)
        found[report["device"]] = report
    return found


def serving(reports: Subscriber, device_ids, version: int) -> bool:
    now = latest(reports)
    return all(
        device in now
        and now[device]["models"].get(MODEL, {}).get("state") == "serving"
        and now[device]["models"][MODEL]["version"] == version
        for device in device_ids
    )


def artifact(fleet, version: int, agrees: bool = True):
    """The packed version; each version's bytes differ (a comment naming it),
    as real versions' do, so no device finds one already downloaded."""
    folder = write_lane_version(fleet.workdir / "built" / str(version), agrees)
    with open(folder / "model.py", "a") as model_py:
        model_py.write(f"# version {version}\n")
    return pack(folder, fleet.artifacts.root / f"lane-{version}.tar.gz")


def fleet_command(fleet, verb: str, *args: str, key: Path | None = None, timeout_s=WAIT_S + 60):
    command = [
        sys.executable, "-m", "edgebox", "fleet", verb,
        "--broker", fleet.brokers.main.url, "--group", GROUP, "--settle", "0",
    ]  # fmt: skip
    if key is not None:
        command += ["--key", str(key)]
    return subprocess.Popen(
        [*command, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def deploy(fleet, key: Path, version: int, packed, *extra: str) -> subprocess.Popen:
    return fleet_command(
        fleet,
        "deploy",
        "--model", MODEL, "--version", str(version),
        "--artifact", fleet.artifacts.url(packed.path.name),
        "--artifact-file", str(packed.path),
        "--wait", str(WAIT_S),
        *extra,
        key=key,
    )  # fmt: skip


def finished(process: subprocess.Popen, timeout_s: float = WAIT_S + 60) -> tuple[int, str]:
    output, _ = process.communicate(timeout=timeout_s)
    return process.returncode, output


def ids(fleet) -> list[str]:
    return [device.device_id for device in fleet.devices]


def lane_files(fleet, version: int) -> list[str]:
    return [d.device_id for d in fleet.devices if (d.repository / MODEL / str(version)).is_dir()]


def test_a_deploy_in_waves_reaches_every_device(fleet, fleet_key, reports, record_property):
    packed = artifact(fleet, 2)
    wait_for(lambda: set(latest(reports)) >= set(ids(fleet)), 60, what="every device's report")
    began = time.monotonic()
    code, output = finished(deploy(fleet, fleet_key.private, 2, packed, "--waves", "1,50%,100%"))
    took = time.monotonic() - began
    assert code == 0, output
    assert serving(reports, ids(fleet), 2)
    moved = fleet.artifacts.bytes_sent(packed.path.name)
    assert moved == packed.size * len(fleet.devices)
    record_property("converged_s", round(took, 1))
    record_property("bytes_moved", moved)
    print(f"\nfleet deploy: {len(fleet.devices)} devices served version 2 after {took:.1f} s; "
          f"{moved} artifact bytes moved ({packed.size} each)")  # fmt: skip


def test_a_device_stopped_during_a_deploy_converges_when_it_starts_again(
    fleet, fleet_key, reports
):
    packed = artifact(fleet, 3)
    away = fleet.devices[0]
    fleet.stop_device(away)
    process = deploy(fleet, fleet_key.private, 3, packed)
    others = [d for d in ids(fleet) if d != away.device_id]
    wait_for(lambda: serving(reports, others, 3), WAIT_S, what="the others to serve version 3")
    assert process.poll() is None, "the deploy finished without the stopped device"
    fleet.start_device(away)
    code, output = finished(process)
    assert code == 0, output
    assert serving(reports, ids(fleet), 3)


def test_a_broker_restart_mid_deploy_does_not_stop_the_deploy(fleet, fleet_key, reports):
    packed = artifact(fleet, 4)
    process = deploy(fleet, fleet_key.private, 4, packed, "--waves", "1,100%")
    wait_for(
        lambda: any(
            r["models"].get(MODEL, {}).get("version") == 4 for r in latest(reports).values()
        ),
        WAIT_S,
        what="the first wave",
    )
    fleet.brokers.restart_main()
    code, output = finished(process)
    assert code == 0, output
    wait_for(lambda: serving(reports, ids(fleet), 4), 60, what="every device on version 4")


def test_a_tampered_artifact_changes_nothing_and_is_reported(fleet, fleet_key, reports):
    packed = artifact(fleet, 5)
    genuine = packed.path.read_bytes()
    packed.path.write_bytes(genuine[:-1] + bytes([genuine[-1] ^ 1]))
    tampered = fleet.workdir / "genuine-5.tar.gz"
    tampered.write_bytes(genuine)
    process = fleet_command(
        fleet,
        "deploy",
        "--model", MODEL, "--version", "5",
        "--artifact", fleet.artifacts.url(packed.path.name),
        "--artifact-file", str(tampered),
        "--waves", "1,100%", "--wait", "60",
        key=fleet_key.private,
    )  # fmt: skip
    code, output = finished(process)
    assert code == 1, output
    assert lane_files(fleet, 5) == []
    failed = [r for r in latest(reports).values() if r["models"][MODEL]["state"] == "failed"]
    assert len(failed) == 1
    assert "sha256" in failed[0]["refused"]["reason"]
    assert all(4 in r["models"][MODEL]["served"] for r in latest(reports).values())


def _traffic(fleet, stop: threading.Event) -> None:
    """Requests to every device's ``lane``, a shadow rollout's samples."""
    body = json.dumps(
        {"inputs": [{"name": "X", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}
    ).encode()
    while not stop.wait(0.02):
        for device in fleet.devices:
            try:
                request = urllib.request.Request(
                    f"http://{device.url}/v2/models/{MODEL}/infer", data=body
                )
                urllib.request.urlopen(request, timeout=5).close()
            except OSError:
                pass


def test_a_version_failing_its_rollout_gate_halts_the_deploy(fleet, fleet_key, reports):
    packed = artifact(fleet, 7, agrees=False)
    stop = threading.Event()
    sender = threading.Thread(target=_traffic, args=(fleet, stop), daemon=True)
    sender.start()
    try:
        process = deploy(
            fleet, fleet_key.private, 7, packed,
            "--waves", "1,100%", "--rollout", "shadow", "--rollout-samples", "5",
        )  # fmt: skip
        code, output = finished(process)
    finally:
        stop.set()
        sender.join(10)
    assert code == 1, output
    now = latest(reports)
    rejected = [d for d, r in now.items() if r["models"][MODEL]["state"] == "rejected"]
    assert len(rejected) == 1, output
    assert lane_files(fleet, 7) == rejected
    assert all(r["models"][MODEL]["served"] == [4] for r in now.values())


def test_a_rollback_returns_every_device_to_the_previous_version(fleet, fleet_key, reports):
    code, output = finished(
        fleet_command(
            fleet, "rollback", "--model", MODEL, "--wait", str(WAIT_S), key=fleet_key.private
        )
    )
    assert code == 0, output
    wait_for(lambda: serving(reports, ids(fleet), 4), 60, what="every device back on 4")


def test_an_untrusted_key_changes_nothing_and_is_reported(fleet, reports, tmp_path):
    stranger = tmp_path / "stranger.key"
    generate_key(stranger)
    before = {d: r["generation"] for d, r in latest(reports).items()}
    packed = artifact(fleet, 6)
    code, output = finished(deploy(fleet, stranger, 6, packed))
    assert code == 1, output
    wait_for(
        lambda: all(
            "does not trust" in (r["refused"] or {}).get("reason", "")
            for r in latest(reports).values()
        ),
        60,
        what="every device to report the untrusted key",
    )
    assert {d: r["generation"] for d, r in latest(reports).items()} == before
    assert lane_files(fleet, 6) == []


def test_prometheus_sees_every_device_at_the_last_generation(fleet, prometheus, reports):
    generations = {r["generation"] for r in latest(reports).values()}
    assert len(generations) == 1
    (generation,) = generations
    wait_for(
        lambda: prometheus.by_device("edgebox_fleet_generation")
        == {d: float(generation) for d in ids(fleet)},
        30,
        what="Prometheus's fleet view",
    )


def test_the_agent_keeps_the_daemon_within_its_budget(fleet, capsys):
    """After the whole day of deploys: the daemons' memory with their fleet
    agents, beside test_harness.py's figure for daemons without one."""
    footprint = fleet.footprint()
    with capsys.disabled():
        print(f"\nfleet footprint with the agent, after the deploys: {footprint.line()}")
    assert footprint.devices == fleet.size
    assert footprint.rss_max_mb < DEVICE_RSS_BUDGET_MB
