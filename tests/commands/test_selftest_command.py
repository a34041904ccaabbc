"""``edgebox selftest`` end to end through the CLI: the JSON report, the exit
status (0 when nothing fails, 1 when something does, 78 for bad settings)
and absent hardware reported as absent, never as a pass."""

from __future__ import annotations

import json
import socket

import pytest

from edgebox.cli import main
from model_fixtures import add_add_sub


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config(tmp_path, repository, **extra) -> str:
    lines = {
        "model_repository": str(repository),
        "host": "127.0.0.1",
        "http_port": free_port(),
        "grpc_port": free_port(),
        "metrics_port": free_port(),
        "state_directory": str(tmp_path / "state"),
        **extra,
    }
    path = tmp_path / "edgebox.yaml"
    path.write_text("".join(f"{key}: {value}\n" for key, value in lines.items()))
    path.write_text(path.read_text() + f"dashboard:\n  port: {free_port()}\n")
    return str(path)


def test_a_sound_machine_that_is_no_jetson_exits_0_with_the_jetson_parts_absent(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("EDGEBOX_MQTT_URL", raising=False)
    add_add_sub(tmp_path / "repo")
    (tmp_path / "root" / "proc").mkdir(parents=True)
    argv = ["selftest", "--json", "--root", str(tmp_path / "root")]
    status = main([*argv, "--config", config(tmp_path, tmp_path / "repo")])
    report = json.loads(capsys.readouterr().out)
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert status == 0, report
    assert report["ok"] is True
    assert statuses["module"] == statuses["TensorRT"] == "not on this machine"
    assert statuses["ports"] == statuses["model repository"] == "pass"
    assert statuses["MQTT broker"] == "not configured"


def test_a_failing_check_exits_1_and_the_text_report_says_which(tmp_path, capsys):
    (tmp_path / "root" / "proc").mkdir(parents=True)
    argv = ["selftest", "--root", str(tmp_path / "root")]
    status = main([*argv, "--config", config(tmp_path, tmp_path / "no-such-repository")])
    out = capsys.readouterr().out
    assert status == 1
    assert "model repository" in out and "FAIL" in out
    assert out.rstrip().endswith("1 failed")


def test_settings_that_do_not_parse_exit_78(tmp_path, capsys):
    bad = tmp_path / "edgebox.yaml"
    bad.write_text("http_port: not-a-port\n")
    assert main(["selftest", "--config", str(bad)]) == 78
    assert "http_port" in capsys.readouterr().err


def test_the_engines_section_comes_last_and_is_absent_off_a_jetson(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("EDGEBOX_MQTT_URL", raising=False)
    add_add_sub(tmp_path / "repo")
    (tmp_path / "root" / "proc").mkdir(parents=True)
    argv = ["selftest", "--json", "--root", str(tmp_path / "root")]
    status = main([*argv, "--config", config(tmp_path, tmp_path / "repo")])
    checks = json.loads(capsys.readouterr().out)["checks"]
    sections = list(dict.fromkeys(check["section"] for check in checks))
    assert status == 0
    assert sections == ["platform", "this machine", "cameras", "engines"]
    assert [(c["name"], c["status"]) for c in checks if c["section"] == "engines"] == [
        ("engines", "not on this machine")
    ]


def test_no_engines_leaves_the_section_out_and_engine_seconds_must_be_positive(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("EDGEBOX_MQTT_URL", raising=False)
    add_add_sub(tmp_path / "repo")
    (tmp_path / "root" / "proc").mkdir(parents=True)
    argv = ["selftest", "--json", "--root", str(tmp_path / "root"), "--no-engines"]
    assert main([*argv, "--config", config(tmp_path, tmp_path / "repo")]) == 0
    engines = [
        c for c in json.loads(capsys.readouterr().out)["checks"] if c["section"] == "engines"
    ]
    assert [(c["status"], c["detail"]) for c in engines] == [
        ("not configured", "left out (--no-engines)")
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(["selftest", "--engine-seconds", "0"])
    assert exit_info.value.code == 2
    assert "expected a number of seconds above 0, got '0'" in capsys.readouterr().err
