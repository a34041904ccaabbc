"""``telemetry.source: auto`` picks jtop when jetson-stats and its service are
there, else sysfs on a Jetson tree, else psutil, and logs why it skipped the
others; a named source that cannot start falls through to the next."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from edgebox.telemetry import choice as source_module
from edgebox.telemetry.choice import open_source
from edgebox.telemetry.source import SourceUnavailable
from fakes.fake_jtop import FakeJtop

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def jtop_socket(tmp_path) -> Path:
    socket = tmp_path / "jtop.sock"
    socket.touch()
    return socket


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "edgebox.telemetry"]


def test_auto_picks_jtop_when_its_socket_exists(jtop_socket, caplog):
    jetson = FakeJtop()
    with caplog.at_level(logging.INFO, logger="edgebox.telemetry"):
        picked = open_source(
            "auto", FIXTURES / "agx_orin", jtop_socket=jtop_socket, connect_jtop=lambda: jetson
        )
    assert picked.name == "jtop"
    assert picked.read().gpu.load_pct == 52.3
    assert messages(caplog) == ["telemetry: reading from jtop"]


def test_auto_skips_jtop_without_its_socket_and_reads_a_jetson_tree_through_sysfs(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="edgebox.telemetry"):
        picked = open_source(
            "auto",
            FIXTURES / "orin_nano",
            jtop_socket=tmp_path / "jtop.sock",
            connect_jtop=FakeJtop,
        )
    assert picked.name == "sysfs"
    assert messages(caplog) == [
        f"telemetry: reading from sysfs (skipped jtop: '{tmp_path / 'jtop.sock'}' does not "
        "exist (jtop.service is not running))"
    ]


def test_auto_without_jetson_stats_installed_and_off_a_jetson_reads_psutil(
    tmp_path, jtop_socket, monkeypatch, caplog
):
    monkeypatch.setattr(source_module, "jtop_installed", lambda: False)
    with caplog.at_level(logging.INFO, logger="edgebox.telemetry"):
        picked = open_source("auto", tmp_path, jtop_socket=jtop_socket)
    assert picked.name == "psutil"
    assert picked.read().gpu is None
    assert messages(caplog) == [
        "telemetry: reading from psutil (skipped jtop: jetson-stats (jtop) is not installed; "
        f"sysfs: '{tmp_path}' does not look like a Jetson (no etc/nv_tegra_release, no iGPU "
        "devfreq node))"
    ]


def test_auto_falls_through_when_the_jtop_service_refuses(jtop_socket, caplog):
    def refuse():
        raise RuntimeError("I can't access jtop.service.")

    with caplog.at_level(logging.INFO, logger="edgebox.telemetry"):
        picked = open_source(
            "auto", FIXTURES / "agx_orin", jtop_socket=jtop_socket, connect_jtop=refuse
        )
    assert picked.name == "sysfs"
    assert messages(caplog) == [
        "telemetry: reading from sysfs (skipped jtop: cannot connect to jtop.service: "
        "I can't access jtop.service.)"
    ]


def test_a_named_source_that_cannot_start_warns_and_the_next_is_used(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="edgebox.telemetry"):
        picked = open_source("sysfs", tmp_path / "empty")
    assert picked.name == "psutil"
    assert caplog.records[0].levelno == logging.WARNING
    assert messages(caplog)[0] == (
        f"telemetry: source 'sysfs' unavailable ('{tmp_path / 'empty'}' has no proc/stat or "
        "proc/meminfo); trying the next"
    )


def test_a_named_source_skips_autos_checks(tmp_path):
    # No socket file: auto would skip jtop, but jtop was asked for by name.
    picked = open_source("jtop", tmp_path, jtop_socket=tmp_path / "none", connect_jtop=FakeJtop)
    assert picked.name == "jtop"


def test_psutil_named_is_psutil(tmp_path):
    assert open_source("psutil", FIXTURES / "agx_orin").name == "psutil"


def test_an_unknown_setting_is_refused():
    with pytest.raises(
        ValueError, match="telemetry source: expected one of auto, jtop, sysfs, psutil, got 'nvml'"
    ):
        open_source("nvml", Path("/"))


def test_no_working_source_at_all_is_unavailable(tmp_path, monkeypatch):
    def no_psutil(*_args):
        raise SourceUnavailable("psutil is not installed")

    monkeypatch.setattr("edgebox.telemetry.psutil_source.PsutilSource", no_psutil)
    monkeypatch.setattr(source_module, "jtop_installed", lambda: False)
    with pytest.raises(
        SourceUnavailable, match=r"telemetry: no source works \(.*psutil: psutil is not installed\)"
    ):
        open_source("auto", tmp_path, jtop_socket=tmp_path / "none")
