"""``edgebox fleet``: the operator's commands against a real mosquitto and
FakeDevices (tests/fleet/fake_devices.py) that answer as FLEET_SPEC's
devices do. Deploys go in waves, halt at the first device that rejects,
time out naming who did not converge, and roll back to ``previous``."""

from __future__ import annotations

import hashlib
import http.server
import json
import stat
import threading
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cli_helpers import run_edgebox
from edgebox.cli import main
from edgebox.commands.console import EXIT_OK, EXIT_PROBLEMS, EXIT_UNREACHABLE
from edgebox.fleet.document import (
    Artifact,
    Desired,
    Targets,
    WantedModel,
    desired_topic,
    document_bytes,
    parse_document,
)
from edgebox.fleet.operator.waves import wave_order
from edgebox.fleet.signing import (
    TrustedKeys,
    generate_key,
    key_id,
    load_private_key,
    load_public_key,
    sign_envelope,
)
from fake_devices import FakeDevice
from mosquitto_broker import Subscriber, make_client

GROUP = "line-3"
MODEL = "add_sub"
ARTIFACT_BYTES = b"not really a tar.gz, but hashed all the same"


class Fleet:
    """One test's corner of the shared broker: its own topic prefix, an
    operator key the fake devices trust, and the fakes it started."""

    def __init__(self, broker, tmp_path: Path, capsys) -> None:
        self.broker = broker
        self.prefix = f"t{uuid.uuid4().hex[:10]}"
        self.key = tmp_path / "operator.key"
        self.public = generate_key(self.key)
        self.trusted = TrustedKeys.from_files([self.public])
        self.artifact_file = tmp_path / "add_sub-2.tar.gz"
        self.artifact_file.write_bytes(ARTIFACT_BYTES)
        self.devices: list[FakeDevice] = []
        self._capsys = capsys

    def device(self, name: str, **behaviour) -> FakeDevice:
        fake = FakeDevice(self.broker, self.prefix, GROUP, name, self.trusted, **behaviour)
        self.devices.append(fake.start())
        return fake

    def connection(self) -> list[str]:
        return ["--broker", self.broker.url, "--group", GROUP, "--prefix", self.prefix,
                "--settle", "0"]  # fmt: skip

    def run(self, *args: str) -> tuple[int, str, str]:
        self._capsys.readouterr()
        status = main(["fleet", *args])
        captured = self._capsys.readouterr()
        return status, captured.out, captured.err

    def deploy(self, version: int, *extra: str) -> tuple[int, str, str]:
        return self.run(
            "deploy", *self.connection(), "--key", str(self.key), "--model", MODEL,
            "--version", str(version), "--artifact", f"http://127.0.0.1:9/{MODEL}-{version}.tar.gz",
            "--artifact-file", str(self.artifact_file), *extra,
        )  # fmt: skip

    def retained_document(self) -> Desired:
        with Subscriber(self.broker, desired_topic(self.prefix, GROUP)) as watcher:
            messages = watcher.wait_for(lambda found: found, what="the retained desired state")
        data, _ = self.trusted.open(messages[-1].payload)
        return parse_document(data)

    def close(self) -> None:
        for fake in self.devices:
            fake.close()


@pytest.fixture
def fleet(mosquitto, tmp_path, capsys):
    built = Fleet(mosquitto, tmp_path, capsys)
    yield built
    built.close()


def published_documents(watcher: Subscriber, trusted: TrustedKeys) -> list[Desired]:
    return [parse_document(trusted.open(message.payload)[0]) for message in watcher.messages()]


def test_deploy_in_waves_widens_the_targets_with_a_new_generation_each_wave(fleet):
    names = ["orin-a", "orin-b", "orin-c", "orin-d"]
    fakes = {name: fleet.device(name) for name in names}
    ordered = wave_order(GROUP, MODEL, names)
    with Subscriber(fleet.broker, desired_topic(fleet.prefix, GROUP)) as watcher:
        status, out, _ = fleet.deploy(2, "--waves", "1,50%,100%", "--wait", "20")
        documents = published_documents(watcher, fleet.trusted)

    assert status == EXIT_OK, out
    assert [d.models[MODEL].targets for d in documents] == [
        Targets(devices=tuple(ordered[:1])),
        Targets(devices=tuple(ordered[:2])),
        Targets(all=True),
    ]
    generations = [d.generation for d in documents]
    assert generations == sorted(set(generations))
    assert documents[-1].models[MODEL].artifact == Artifact(
        f"http://127.0.0.1:9/{MODEL}-2.tar.gz",
        hashlib.sha256(ARTIFACT_BYTES).hexdigest(),
        len(ARTIFACT_BYTES),
    )
    assert all(fake.models[MODEL]["served"] == [2] for fake in fakes.values())
    assert fleet.retained_document().generation == generations[-1]
    for name in names:
        assert name in out


def test_a_device_that_rejects_halts_the_deploy_after_its_wave(fleet):
    names = ["orin-a", "orin-b", "orin-c", "orin-d"]
    first = wave_order(GROUP, MODEL, names)[0]
    fakes = {
        name: fleet.device(name, rejects={2: "shadow answers disagree"} if name == first else None)
        for name in names
    }

    status, out, _ = fleet.deploy(2, "--waves", "1,50%,100%", "--wait", "20")

    assert status == EXIT_PROBLEMS
    assert f"halted: device '{first}'" in out
    assert "shadow answers disagree" in out
    assert fleet.retained_document().models[MODEL].targets == Targets(devices=(first,))
    for name, fake in fakes.items():
        if name != first:
            assert fake.models[MODEL]["state"] == "not_targeted"
            assert 2 not in fake.models[MODEL]["served"]


def test_a_wave_that_times_out_names_the_device_that_did_not_converge(fleet):
    for name in ["orin-a", "orin-b", "orin-c"]:
        fleet.device(name)
    fleet.device("orin-gone").go_offline()

    status, out, _ = fleet.deploy(2, "--wait", "1.5")

    assert status == EXIT_PROBLEMS
    assert "timed out after 1.5s in wave 1" in out
    assert "orin-gone (offline)" in out
    assert "orin-a (" not in out


def test_status_shows_online_and_offline_devices_with_their_states(fleet):
    fleet.device("orin-a", serving={MODEL: 3})
    fleet.device("orin-b", serving={MODEL: 2}).go_offline()
    elsewhere = FakeDevice(fleet.broker, fleet.prefix, "line-4", "orin-z", fleet.trusted)
    fleet.devices.append(elsewhere.start())

    status, out, _ = fleet.run("status", *fleet.connection(), "--json")

    assert status == EXIT_OK
    devices = {entry["device"]: entry for entry in json.loads(out)["devices"]}
    assert sorted(devices) == ["orin-a", "orin-b"]
    assert devices["orin-a"]["status"] == "online"
    assert devices["orin-b"]["status"] == "offline"
    assert devices["orin-a"]["models"][MODEL] == {
        "state": "serving", "version": 3, "served": [3], "reason": ""
    }  # fmt: skip

    status, out, _ = fleet.run("status", *fleet.connection())
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["orin-b"][:7] == ["orin-b", "offline", "0", MODEL, "serving", "2", "2"]


def test_rollback_publishes_the_previous_version_to_every_device(fleet):
    fakes = [fleet.device(name) for name in ["orin-a", "orin-b"]]
    assert fleet.deploy(1, "--wait", "20")[0] == EXIT_OK
    assert fleet.deploy(2, "--waves", "1,100%", "--wait", "20")[0] == EXIT_OK

    status, out, _ = fleet.run(
        "rollback", *fleet.connection(), "--key", str(fleet.key), "--model", MODEL,
        "--wait", "20",
    )  # fmt: skip

    assert status == EXIT_OK, out
    wanted = fleet.retained_document().models[MODEL]
    assert (wanted.version, wanted.targets) == (1, Targets(all=True))
    assert wanted.previous is not None and wanted.previous[0] == 2
    assert wanted.rollout == {"policy": "immediate"}
    assert [fake.models[MODEL]["served"] for fake in fakes] == [[1], [1]]


def test_rollback_without_a_previous_version_is_refused(fleet):
    assert fleet.deploy(1, "--wait", "20")[0] == EXIT_OK
    before = fleet.retained_document()

    status, _, err = fleet.run(
        "rollback", *fleet.connection(), "--key", str(fleet.key), "--model", MODEL
    )

    assert status == EXIT_PROBLEMS
    assert f"model '{MODEL}': version 1 has no previous version to roll back to" in err
    assert fleet.retained_document().generation == before.generation


def test_deploy_over_another_keys_document_warns_and_keeps_its_other_models(fleet, tmp_path):
    other_key = Ed25519PrivateKey.generate()
    kept = WantedModel("lane_detector", 7, Artifact("https://store/l-7.tar.gz", "a" * 64, 10))
    earlier = Desired(GROUP, 5, "2026-11-28T05:00:00Z", {"lane_detector": kept})
    client = make_client(fleet.broker)
    client.connect("127.0.0.1", fleet.broker.port)
    client.loop_start()
    client.publish(
        desired_topic(fleet.prefix, GROUP),
        sign_envelope(document_bytes(earlier), other_key),
        qos=1,
        retain=True,
    ).wait_for_publish(10)
    client.disconnect()
    client.loop_stop()

    status, _, err = fleet.deploy(2, "--wait", "5")

    assert status == EXIT_OK
    assert f"signed by key '{key_id(other_key.public_key())}'" in err
    now = fleet.retained_document()
    assert now.models["lane_detector"] == kept
    assert now.models[MODEL].version == 2 and now.generation > 5


def test_deploy_hashes_the_artifact_from_its_url_without_a_local_copy(fleet):
    payload = b"an artifact served over HTTP" * 100

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/add_sub-2.tar.gz"
    try:
        status, _, err = fleet.run(
            "deploy", *fleet.connection(), "--key", str(fleet.key), "--model", MODEL,
            "--version", "2", "--artifact", url, "--wait", "5",
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()

    assert status == EXIT_OK, err
    assert fleet.retained_document().models[MODEL].artifact == Artifact(
        url, hashlib.sha256(payload).hexdigest(), len(payload)
    )


def test_deploy_to_a_broker_nobody_answers_exits_unreachable(fleet, tmp_path):
    import socket

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    status, _, err = fleet.run(
        "status", "--broker", f"mqtt://127.0.0.1:{port}", "--group", GROUP, "--settle", "0"
    )
    assert status == EXIT_UNREACHABLE
    assert f"broker 'mqtt://127.0.0.1:{port}'" in err


def test_keygen_writes_a_private_key_0600_and_its_public_key_beside_it(tmp_path):
    key = tmp_path / "keys" / "operator.key"
    key.parent.mkdir()

    done = run_edgebox("fleet", "keygen", str(key))

    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    public = load_public_key(key.with_name("operator.key.pub"))
    assert public == load_private_key(key).public_key()
    assert f"key id:      {key_id(public)}" in done.stdout


def test_deploy_refuses_a_key_file_that_is_not_a_private_key(tmp_path):
    public = generate_key(tmp_path / "operator.key")

    done = run_edgebox(
        "fleet", "deploy", "--broker", "mqtt://127.0.0.1:9", "--group", GROUP,
        "--key", str(public), "--model", MODEL, "--version", "2",
        "--artifact", "http://127.0.0.1:9/a.tar.gz",
    )  # fmt: skip

    assert done.returncode == 2
    assert f"argument --key: private key '{public}': not a PEM private key" in done.stderr


def test_pack_prints_the_artifacts_sha256_and_size(tmp_path, capsys):
    pytest.importorskip("edgebox.fleet.artifacts")
    version = tmp_path / "add_sub" / "2"
    version.mkdir(parents=True)
    (version / "model.onnx").write_bytes(b"onnx bytes")
    out = tmp_path / "add_sub-2.tar.gz"

    assert main(["fleet", "pack", str(version), str(out), "--json"]) == EXIT_OK

    printed = json.loads(capsys.readouterr().out)
    data = out.read_bytes()
    assert printed == {
        "path": str(out), "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)
    }  # fmt: skip
