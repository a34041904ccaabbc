"""The fleet agent in the real daemon, with a real mosquitto and a real
artifact server: a signed desired state brings a new version into service
and the retained report says so; an untrusted key, a replayed generation and
a tampered artifact change nothing and are reported once; a rollback parks
the newer version; and after a restart the device remembers the generation
it applied. The scenario runs in order on one daemon, each step a new
generation, as an operator's deploys would."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from artifact_server import ArtifactServer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from daemon_process import DaemonProcess, wait_for
from edgebox.fleet.artifacts import pack
from edgebox.fleet.document import (
    Artifact,
    Desired,
    Targets,
    WantedModel,
    desired_topic,
    document_bytes,
    reported_topic,
)
from edgebox.fleet.signing import generate_key, load_private_key, sign_envelope
from model_fixtures import add_add_sub, add_sub_infer_inputs
from mosquitto_broker import Subscriber, daemon_mqtt_flags, make_client
from scripts.onnx_builders import build_add_sub


class Deployment:
    """The operator's side, by hand: signed documents on the group's topic."""

    def __init__(self, broker, group: str, key: Ed25519PrivateKey) -> None:
        self.broker = broker
        self.group = group
        self.key = key

    def publish(self, payload: bytes) -> None:
        client = make_client(self.broker)
        client.connect("127.0.0.1", self.broker.port)
        client.loop_start()
        try:
            info = client.publish(desired_topic("edgebox", self.group), payload, 1, retain=True)
            info.wait_for_publish(10)
        finally:
            client.disconnect()
            client.loop_stop()

    def document(self, generation: int, version: int, artifact: Artifact, **fields) -> Desired:
        wanted = WantedModel("add_sub", version, artifact, Targets(all=True), **fields)
        return Desired(self.group, generation, "2026-11-28T05:00:00Z", {"add_sub": wanted})

    def deploy(self, document: Desired, key: Ed25519PrivateKey | None = None) -> None:
        self.publish(sign_envelope(document_bytes(document), key or self.key))


@pytest.fixture(scope="module")
def fleet_files(module_path: Path) -> dict:
    keys = module_path / "keys"
    keys.mkdir()
    public = generate_key(keys / "release")
    store = module_path / "store"
    store.mkdir()
    artifacts = {}
    for version in (2, 3):
        folder = module_path / "built" / str(version)
        build_add_sub(folder / "model.onnx")
        packed = pack(folder, store / f"add_sub-{version}.tar.gz")
        artifacts[version] = packed
    return {"public": public, "private": keys / "release", "store": store, "packed": artifacts}


@pytest.fixture(scope="module")
def server(fleet_files):
    with ArtifactServer(fleet_files["store"]) as running:
        yield running


@pytest.fixture(scope="module")
def device() -> str:
    return f"fleet-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def group(device) -> str:
    return f"g-{device}"


@pytest.fixture(scope="module")
def repository(repository: Path) -> Path:
    add_add_sub(repository)
    return repository


@pytest.fixture(scope="module")
def daemon_args(session_mosquitto, module_path, fleet_files, device, group) -> list[str]:
    return [
        "--repository-poll-secs",
        "0.2",
        *daemon_mqtt_flags(session_mosquitto.url, device, module_path / "spool.sqlite"),
        "--fleet-group",
        group,
        "--fleet-trusted-keys",
        str(fleet_files["public"]),
        "--fleet-download-dir",
        str(module_path / "downloads"),
    ]


@pytest.fixture(scope="module")
def watcher(session_mosquitto, device):
    with Subscriber(session_mosquitto, f"edgebox/{device}/#") as subscriber:
        yield subscriber


@pytest.fixture(scope="module")
def operator(session_mosquitto, group, fleet_files) -> Deployment:
    return Deployment(session_mosquitto, group, load_private_key(fleet_files["private"]))


def latest_report(watcher: Subscriber, device: str) -> dict | None:
    reports = watcher.messages(reported_topic("edgebox", device))
    return json.loads(reports[-1].payload) if reports else None


def report_where(watcher, device, predicate, what: str) -> dict:
    return wait_for(
        lambda: (r := latest_report(watcher, device)) is not None and predicate(r) and r,
        60,
        what=what,
    )


def refusals(watcher: Subscriber, device: str) -> list[dict]:
    events = [json.loads(m.payload) for m in watcher.messages(f"edgebox/{device}/events")]
    return [
        e for e in events if e.get("schema", {}).get("name") == "edgebox.fleet.document_refused"
    ]


def answered_by(daemon: DaemonProcess) -> str:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    with httpclient.InferenceServerClient(daemon.url) as client:
        result = client.infer("add_sub", add_sub_infer_inputs(httpclient, a, a))
        assert (result.as_numpy("OUTPUT0") == a + a).all()
        return result.get_response()["model_version"]


def artifact(fleet_files, server, version: int) -> Artifact:
    packed = fleet_files["packed"][version]
    return Artifact(server.url(packed.path.name), packed.sha256, packed.size)


def test_a_signed_desired_state_brings_the_version_into_service(
    daemon, watcher, operator, fleet_files, server, device
) -> None:
    operator.deploy(operator.document(1, 2, artifact(fleet_files, server, 2)))
    report = report_where(
        watcher,
        device,
        lambda r: r["generation"] == 1 and r["models"]["add_sub"]["state"] == "serving",
        "the device to serve version 2",
    )
    assert 2 in report["models"]["add_sub"]["served"]
    assert report["refused"] is None
    assert answered_by(daemon) == "2"
    assert server.bytes_sent(fleet_files["packed"][2].path.name) == fleet_files["packed"][2].size


def test_a_document_signed_by_an_untrusted_key_changes_nothing_and_is_reported_once(
    daemon, watcher, operator, fleet_files, server, device
) -> None:
    stranger = Ed25519PrivateKey.generate()
    operator.deploy(operator.document(2, 3, artifact(fleet_files, server, 3)), stranger)
    report = report_where(
        watcher, device, lambda r: r["refused"] is not None, "the refusal in the report"
    )
    assert "does not trust" in report["refused"]["reason"]
    assert report["generation"] == 1
    assert answered_by(daemon) == "2"
    wait_for(lambda: len(refusals(watcher, device)) == 1, 10, what="one refusal event")


def test_a_replayed_generation_is_refused(daemon, watcher, operator, fleet_files, server, device):
    operator.deploy(operator.document(1, 3, artifact(fleet_files, server, 3)))
    report = report_where(
        watcher,
        device,
        lambda r: "not newer" in (r["refused"] or {}).get("reason", ""),
        "the replay refused",
    )
    assert report["generation"] == 1
    assert answered_by(daemon) == "2"


def test_a_tampered_artifact_changes_nothing_and_is_reported(
    daemon, watcher, operator, fleet_files, server, device
) -> None:
    genuine = artifact(fleet_files, server, 3)
    tampered = Artifact(genuine.url, "0" * 64, genuine.size)
    operator.deploy(operator.document(3, 3, tampered))
    report = report_where(
        watcher,
        device,
        lambda r: r["generation"] == 3 and r["models"]["add_sub"]["state"] == "failed",
        "the tampered artifact to fail",
    )
    assert "sha256" in report["models"]["add_sub"]["reason"]
    assert "sha256" in report["refused"]["reason"]
    assert not (daemon.repository / "add_sub" / "3").exists()
    assert answered_by(daemon) == "2"


def test_a_rollback_parks_the_newer_version(
    daemon, watcher, operator, fleet_files, server, device
) -> None:
    back = operator.document(4, 2, artifact(fleet_files, server, 2))
    operator.deploy(back)
    report_where(
        watcher,
        device,
        lambda r: r["generation"] == 4 and r["models"]["add_sub"]["state"] == "serving",
        "version 2 to serve again",
    )
    first = Artifact(server.url("none.tar.gz"), "1" * 64, 1)
    operator.deploy(operator.document(5, 1, first))
    report = report_where(
        watcher,
        device,
        lambda r: r["generation"] == 5 and r["models"]["add_sub"]["state"] == "serving",
        "the rollback to version 1",
    )
    assert report["models"]["add_sub"]["served"] == [1]
    assert (daemon.repository / "add_sub" / ".rolled-back" / "2").is_dir()
    assert answered_by(daemon) == "1"


def test_after_a_restart_the_applied_generation_is_remembered(
    daemon, watcher, operator, device
) -> None:
    before = len(refusals(watcher, device))
    daemon.stop()
    daemon.start()
    report = report_where(
        watcher, device, lambda r: r["generation"] == 5, "the report after the restart"
    )
    assert report["models"]["add_sub"]["state"] == "serving"
    assert len(refusals(watcher, device)) == before
    assert answered_by(daemon) == "1"
