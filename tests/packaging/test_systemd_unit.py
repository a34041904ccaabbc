"""systemd/edgebox.service: the contract between the unit, the CLI and sd_notify."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgebox import sd_notify
from edgebox.cli import build_parser
from edgebox.commands.console import EXIT_CONFIG
from edgebox.dashboard.settings import DEFAULT_SESSION_KEY_PATH
from edgebox.mqtt.settings import DEFAULT_SPOOL_PATH, MqttSettings
from edgebox.settings import Settings, load_settings
from edgebox.settings.loader import DEFAULT_CONFIG_FILE

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "edgebox.service"
SHIPPED_CONFIG = ROOT / "etc" / "edgebox.yaml"
APPLIANCE_DOC = ROOT / "docs" / "appliance.md"
VENV_EDGEBOX = "/opt/edgebox/venv/bin/edgebox"
NO_SYSTEMD_ANALYZE = (
    "systemd-analyze is not installed (Debian's 'systemd' package; `make test` installs it)"
)


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """systemd's unit syntax, as far as this unit needs it: [Section], Key=Value
    (a key may repeat), '#' and ';' comments, backslash continuation lines."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            assert line.endswith("]"), f"line {number}: bad section header {line!r}"
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"line {number}: setting outside a section"
        key, sep, value = line.partition("=")
        assert sep, f"line {number}: expected Key=Value, got {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    assert not pending, "file ends with a continuation"
    return sections


def seconds(value: str) -> float:
    """A systemd time span such as '30s', '5min', '1min 30s' or '90'."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "ms": 0.001}
    total = 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value)
    assert parts, f"not a time span: {value!r}"
    for number, unit in parts:
        total += float(number) * units[unit]
    return total


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return parse_unit(UNIT.read_text(encoding="utf-8"))


def one(unit, section: str, key: str) -> str:
    values = unit.get(section, {}).get(key)
    assert values, f"[{section}] {key}= is missing"
    assert len(values) == 1, f"[{section}] {key}= is set {len(values)} times"
    return values[0]


def test_parser_keeps_repeated_keys_and_continuations():
    parsed = parse_unit("[Unit]\nAfter=a\nAfter=b\n# c\n[Service]\nExecStart=/x \\\n  --y\n")
    assert parsed == {"Unit": {"After": ["a", "b"]}, "Service": {"ExecStart": ["/x --y"]}}


def test_type_notify_with_watchdog_and_restart(unit):
    assert one(unit, "Service", "Type") == "notify"
    assert one(unit, "Service", "Restart") == "on-failure"
    assert one(unit, "Service", "RestartPreventExitStatus") == str(EXIT_CONFIG)
    watchdog = seconds(one(unit, "Service", "WatchdogSec"))
    assert 10 <= watchdog <= 120


def test_daemon_pings_the_watchdog_well_within_its_period(unit, monkeypatch):
    watchdog = seconds(one(unit, "Service", "WatchdogSec"))
    monkeypatch.setenv("WATCHDOG_USEC", str(int(watchdog * 1_000_000)))
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    interval = sd_notify.watchdog_interval_s()
    assert interval is not None and interval <= watchdog / 2


def test_execstart_runs_the_packaged_daemon_with_the_etc_config(unit):
    argv = shlex.split(one(unit, "Service", "ExecStart"))
    assert argv[0] == VENV_EDGEBOX
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve"
    assert args.config == DEFAULT_CONFIG_FILE == Path("/etc/edgebox/edgebox.yaml")


def test_stop_timeout_covers_the_daemons_exit_timeout(unit):
    # Shutdown finishes in-flight work and unloads within exit_timeout_secs in
    # all; systemd must not SIGKILL before, and a margin covers the unloading.
    stop = seconds(one(unit, "Service", "TimeoutStopSec"))
    assert stop >= Settings().exit_timeout_secs + 10


def test_runs_as_edgebox_with_state_directory_holding_the_default_repository(unit):
    assert one(unit, "Service", "User") == "edgebox"
    state_dirs = " ".join(unit["Service"]["StateDirectory"]).split()
    assert "edgebox" in state_dirs
    assert Settings().model_repository.is_relative_to("/var/lib/edgebox")
    relative = Settings().model_repository.relative_to("/var/lib")
    assert str(relative) in state_dirs, "the default repository is created by systemd too"


@pytest.mark.parametrize(
    "key", ["PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "PrivateUsers"]
)
def test_no_setting_that_closes_the_gpu_device_nodes(unit, key):
    for section in unit.values():
        values = [v.lower() for v in section.get(key, [])]
        assert not values or values == ["no"], f"{key}= would hide /dev/nvhost-* and /dev/nvmap"


def test_hardened_but_not_privileged(unit):
    assert one(unit, "Service", "NoNewPrivileges") == "yes"
    assert one(unit, "Service", "ProtectSystem") == "strict"
    # CAP_LEASE lets the poller see that a file another user copies in is still
    # being written; it is the only capability the daemon holds.
    assert one(unit, "Service", "CapabilityBoundingSet") == "CAP_LEASE"
    assert one(unit, "Service", "AmbientCapabilities") == "CAP_LEASE"


def test_installed_for_multi_user_target(unit):
    assert "multi-user.target" in one(unit, "Install", "WantedBy").split()


def test_debhelper_installs_this_very_file():
    link = ROOT / "debian" / "edgebox.service"
    assert link.resolve() == UNIT.resolve(), "debian/edgebox.service must point at the unit"


def test_reload_sends_sighup_to_the_daemon(unit):
    # The daemon re-reads its settings on SIGHUP (edgebox/daemon.py).
    assert one(unit, "Service", "ExecReload") == "/bin/kill -HUP $MAINPID"


def writable_roots(unit) -> list[Path]:
    """What ProtectSystem=strict leaves writable for this unit: its state,
    cache, runtime and logs directories (the private /tmp aside)."""
    service = unit["Service"]
    bases = {
        "StateDirectory": "/var/lib",
        "CacheDirectory": "/var/cache",
        "RuntimeDirectory": "/run",
        "LogsDirectory": "/var/log",
    }
    roots = [
        Path(base) / name
        for key, base in bases.items()
        for name in " ".join(service.get(key, [])).split()
    ]
    return roots + [Path(p) for p in " ".join(service.get("ReadWritePaths", [])).split()]


def test_every_path_the_daemon_writes_by_default_is_writable_under_the_sandbox(unit):
    assert one(unit, "Service", "ProtectSystem") == "strict"
    shipped = load_settings({}, config_file=SHIPPED_CONFIG, environ={})
    # The shipped file keeps mqtt commented out; uncommented, it is all defaults.
    mqtt = shipped.mqtt or MqttSettings()
    environment = dict(value.split("=", 1) for value in unit["Service"]["Environment"])
    written = {
        "model_repository": shipped.model_repository,
        "mqtt.spool_path": mqtt.resolved_spool_path,
        "dashboard.session_key_path": shipped.dashboard.resolved_session_key_path,
        "CUDA_CACHE_PATH": Path(environment["CUDA_CACHE_PATH"]),
    }
    assert mqtt.resolved_spool_path == DEFAULT_SPOOL_PATH
    assert shipped.dashboard.resolved_session_key_path == DEFAULT_SESSION_KEY_PATH
    roots = writable_roots(unit)
    outside = {
        name: str(path)
        for name, path in written.items()
        if not any(path.is_relative_to(root) for root in roots)
    }
    assert not outside, f"not writable under ProtectSystem=strict (roots {roots}): {outside}"


def verifiable_copy(tmp_path: Path) -> Path:
    """The unit as ``systemd-analyze`` can check it here: it insists that
    ExecStart's program exists, so it points at this Python."""
    text = UNIT.read_text(encoding="utf-8").replace(VENV_EDGEBOX, sys.executable)
    copy = tmp_path / "edgebox.service"
    copy.write_text(text, encoding="utf-8")
    return copy


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason=NO_SYSTEMD_ANALYZE)
def test_systemd_analyze_verify(tmp_path):
    result = subprocess.run(
        ["systemd-analyze", "verify", str(verifiable_copy(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = result.stdout + result.stderr
    complaints = [line for line in output.splitlines() if "edgebox.service" in line]
    assert result.returncode == 0 and not complaints, output


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason=NO_SYSTEMD_ANALYZE)
def test_security_exposure_is_the_one_docs_appliance_reports(tmp_path):
    command = ["systemd-analyze", "security", "--offline=yes", "--no-pager", "--threshold=100"]
    result = subprocess.run(
        [*command, str(verifiable_copy(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = result.stdout + result.stderr
    if "--offline" in output and ("unrecognized" in output or "Unknown" in output):
        pytest.skip(f"this systemd-analyze has no --offline (systemd 250 or later): {output}")
    score = re.search(r"Overall exposure level for edgebox\.service: (\d+\.\d)", output)
    assert score, output
    assert float(score.group(1)) <= 2.5, output
    documented = re.search(
        r"`systemd-analyze security` rates the unit \*\*(\d+\.\d)", APPLIANCE_DOC.read_text()
    )
    assert documented, "docs/appliance.md does not report the exposure score"
    assert documented.group(1) == score.group(1), "docs/appliance.md reports another score"
