"""scripts/provision.sh against a fake device: `ssh` and `scp` on PATH are
test doubles that record every call and answer as a device would, so the
order of the steps (architecture, copy, dpkg -i, clean up, report) and the
failure paths are checked without a Jetson. Needs bash and dpkg-deb."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROVISION = ROOT / "scripts" / "provision.sh"

pytestmark = pytest.mark.skipif(
    not shutil.which("dpkg-deb"), reason="needs dpkg-deb (apt-get install dpkg)"
)

FAKE_SSH = """#!{python}
import json, os, sys
args = sys.argv[1:]
options = []
tty = False
while args and args[0].startswith("-"):
    if args[0] == "-t":
        tty = True
        args = args[1:]
    else:
        options.append(args[1])
        args = args[2:]
host, command = args[0], " ".join(args[1:])
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"tool": "ssh", "host": host, "options": options, "command": command}}) + "\\n")
if command == "dpkg --print-architecture":
    print(os.environ["FAKE_ARCH"])
elif command.startswith("dpkg-query"):
    print(os.environ.get("FAKE_BEFORE", ""), end="")
elif command.startswith("mktemp -d /tmp/edgebox-provision."):
    print("/tmp/edgebox-provision.Ab12Cd")
elif command.startswith("sudo "):
    sys.exit(int(os.environ.get("FAKE_DPKG_RC", "0")))
elif command == "systemctl is-active edgebox":
    print(os.environ.get("FAKE_STATE", "active"))
    sys.exit(0 if os.environ.get("FAKE_STATE", "active") == "active" else 3)
elif "/v2/health/ready" in command:
    print(os.environ.get("FAKE_READY", "200"))
elif command.startswith("journalctl"):
    print("edgebox[42]: fake journal line")
"""

FAKE_SCP = """#!{python}
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"tool": "scp", "args": sys.argv[1:]}}) + "\\n")
"""


def fake_deb(folder: Path, arch: str, version: str) -> Path:
    """A real, empty .deb named edgebox: provision.sh reads its control fields."""
    package = folder / f"pkg-{arch}"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text(
        f"Package: edgebox\nVersion: {version}\nArchitecture: {arch}\n"
        "Maintainer: test <test@example.com>\nDescription: fake\n"
    )
    deb = folder / f"edgebox_{version}_{arch}.deb"
    subprocess.run(["dpkg-deb", "--build", str(package), str(deb)], check=True,
                   capture_output=True, timeout=60)
    return deb


@pytest.fixture
def device(tmp_path):
    """PATH with the fake ssh/scp first; returns (env, log reader)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ssh", FAKE_SSH), ("scp", FAKE_SCP)):
        path = bin_dir / name
        path.write_text(text.format(python=sys.executable))
        path.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(log),
           "FAKE_ARCH": "amd64", "FAKE_BEFORE": "0.1.0-1"}

    def calls() -> list[dict]:
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    return env, calls


def provision(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(PROVISION), *args], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def test_provision_copies_installs_cleans_up_then_reports(device, tmp_path):
    env, calls = device
    deb = fake_deb(tmp_path, "amd64", "0.2.0-1")

    result = provision(env, "pi@jetson", "--deb", str(deb), "--ssh-option", "Port=2222")

    assert result.returncode == 0, result.stderr
    steps = [(c["tool"], c.get("command", " ".join(c.get("args", [])))) for c in calls()]
    assert steps == [
        ("ssh", "dpkg --print-architecture"),
        ("ssh", "dpkg-query -W -f='${Version}' edgebox 2>/dev/null || true"),
        ("ssh", "mktemp -d /tmp/edgebox-provision.XXXXXX"),
        ("scp", f"-q -o Port=2222 {deb} pi@jetson:/tmp/edgebox-provision.Ab12Cd/edgebox.deb"),
        ("ssh", "sudo DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold "
                "/tmp/edgebox-provision.Ab12Cd/edgebox.deb"),
        ("ssh", "rm -rf /tmp/edgebox-provision.Ab12Cd"),
        ("ssh", "systemctl is-active edgebox"),
        steps[7],
    ]
    assert "curl -s -o /dev/null -w '%{http_code}' http://localhost:8000/v2/health/ready" \
        in steps[7][1]
    assert all(c["host"] == "pi@jetson" and c["options"] == ["Port=2222"]
               for c in calls() if c["tool"] == "ssh")
    assert result.stdout.splitlines() == [
        "provision.sh: pi@jetson (amd64): edgebox 0.1.0-1 -> 0.2.0-1",
        "provision.sh: pi@jetson: systemctl is-active edgebox: active",
        "provision.sh: pi@jetson: GET localhost:8000/v2/health/ready: 200",
        "provision.sh: pi@jetson serves edgebox 0.2.0-1",
    ]


def test_provision_not_ready_fails_with_the_journal(device, tmp_path):
    env, calls = device
    deb = fake_deb(tmp_path, "amd64", "0.2.0-1")

    result = provision({**env, "FAKE_READY": "503", "FAKE_STATE": "activating"},
                       "jetson", "--deb", str(deb), "--port", "8123")

    assert result.returncode == 1
    assert "provision.sh: jetson: GET localhost:8123/v2/health/ready: 503" in result.stdout
    assert "edgebox[42]: fake journal line" in result.stderr
    assert result.stderr.endswith(
        "provision.sh: jetson: edgebox 0.2.0-1 is installed but not serving (journal above)\n")
    assert calls()[-1]["command"] == "journalctl -u edgebox -n 20 --no-pager"


def test_provision_removes_the_copy_when_dpkg_fails(device, tmp_path):
    env, calls = device
    deb = fake_deb(tmp_path, "amd64", "0.2.0-1")

    result = provision({**env, "FAKE_DPKG_RC": "1"}, "jetson", "--deb", str(deb))

    assert result.returncode == 1
    assert "provision.sh: dpkg -i failed on 'jetson' (its output is above)" in result.stderr
    commands = [c.get("command") for c in calls()]
    assert commands[-1] == "rm -rf /tmp/edgebox-provision.Ab12Cd"
    assert "systemctl is-active edgebox" not in commands


def test_provision_refuses_a_package_for_another_architecture(device, tmp_path):
    env, calls = device
    deb = fake_deb(tmp_path, "amd64", "0.2.0-1")

    result = provision({**env, "FAKE_ARCH": "arm64"}, "jetson", "--deb", str(deb))

    assert result.returncode == 1
    assert result.stderr == f"provision.sh: --deb '{deb}' is for amd64, 'jetson' is arm64\n"
    assert [c["tool"] for c in calls()] == ["ssh", "ssh"]
