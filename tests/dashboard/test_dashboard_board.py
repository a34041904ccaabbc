"""The Board page: /board renders from the real web/ templates, and
/api/v1/board carries what jtop shows, from a fake jtop and from the AGX Orin
fixture sysfs tree; what a source cannot know is null, never 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_client import PASSWORD_HASH, dashboard_deps
from test_dashboard_api import get

from edgebox.dashboard.app import create_app, find_web_root
from edgebox.dashboard.settings import DashboardSettings
from edgebox.telemetry.jtop_source import JtopSource
from edgebox.telemetry.sysfs_source import SysfsSource
from fakes.fake_dashboard_sources import FakeTelemetry
from fakes.fake_jtop import FakeJetsonClocks, FakeJtop

AGX_ORIN_TREE = Path(__file__).resolve().parents[1] / "telemetry" / "fixtures" / "agx_orin"


def telemetry_of(source) -> FakeTelemetry:
    """What the sampler would hold after one reading of ``source``."""
    return FakeTelemetry([source.read()], source.device_info())


def test_board_from_jtop_has_rails_engines_emc_and_jetson_clocks(stack, make_app):
    jetson = FakeJtop()
    jetson.jetson_clocks = FakeJetsonClocks(True)
    source = JtopSource(connect=lambda: jetson)
    document = get_anonymous(make_app, stack, telemetry_of(source))
    device, sample = document["device"], document["sample"]
    assert (device["model"], device["cpu_cores"], device["dla_cores"]) == (
        "NVIDIA Jetson AGX Orin Developer Kit",
        12,
        2,
    )
    assert sample["source"] == "jtop"
    assert len(sample["cpu_per_core_pct"]) == 12
    assert sample["cpu_per_core_pct"][0] == pytest.approx(20.0)
    assert (sample["emc_pct"], sample["emc_freq_mhz"]) == (14, 3199.0)
    assert sample["cpu_freq_mhz"] == [2188.8] * 12
    assert sample["jetson_clocks"] is True
    assert (sample["nvpmodel"], sample["nvpmodel_id"]) == ("MAXN", 0)
    assert sample["fan_pct"] == 25.9
    assert sample["power"]["VDD_GPU_SOC"] == {
        "voltage_mv": 4992,
        "current_ma": 636,
        "power_mw": 3174,
    }
    assert sample["total_power_mw"] == 6743
    assert sample["engines"]["DLA0"] == {"online": True, "freq_mhz": 1600.0}
    assert sample["engines"]["DLA1"] == {"online": False, "freq_mhz": None}
    assert sample["temperatures_c"]["tj"] == 47.3
    assert document["reason"] == ""


def test_board_from_sysfs_leaves_what_it_cannot_read_null(stack, make_app):
    document = get_anonymous(make_app, stack, telemetry_of(SysfsSource(AGX_ORIN_TREE)))
    sample = document["sample"]
    assert sample["source"] == "sysfs"
    assert (sample["emc_pct"], sample["emc_freq_mhz"], sample["jetson_clocks"]) == (
        None,
        None,
        None,
    )
    assert sample["cpu_freq_mhz"][-1] is None
    assert sample["engines"]["DLA1"] == {"online": True, "freq_mhz": None}
    assert set(sample["power"]) == {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"}
    assert sample["power"]["VDD_GPU_SOC"]["voltage_mv"] == 4992
    # One read, nothing to compare the CPU's counters with: each core unknown.
    assert sample["cpu_per_core_pct"] == [None] * 12


def test_board_before_the_first_sample_and_with_telemetry_off(stack, make_app):
    waiting = get_anonymous(make_app, stack, FakeTelemetry([]))
    assert (waiting["sample"], waiting["reason"]) == (None, "no telemetry sample yet")
    assert waiting["device"]["model"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert get_anonymous(make_app, stack, None) == {
        "device": None,
        "sample": None,
        "reason": "telemetry off",
    }


def get_anonymous(make_app, stack, telemetry) -> dict:
    deps = dashboard_deps(stack, telemetry=telemetry)
    return get(make_app(deps=deps, anonymous_read=True).test_client(), "/api/v1/board")


@pytest.fixture
def real_pages(stack, tmp_path_factory):
    """A client of an app rendering web/'s own templates and static files."""
    settings = DashboardSettings(
        password_hash=PASSWORD_HASH,
        anonymous_read=True,
        session_key_path=tmp_path_factory.mktemp("state") / "session.key",
    )
    deps = dashboard_deps(stack, telemetry=FakeTelemetry([]))
    app = create_app(deps, settings, web_root=find_web_root(), session_key=b"k" * 32)
    app.testing = True
    yield app.test_client()
    app.extensions["edgebox.dashboard"].events.stop(5)


def test_board_page_renders_with_its_script_and_a_nav_link_on_every_page(real_pages):
    page = real_pages.get("/board")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert '<script src="/static/js/board.js" defer></script>' in html
    assert 'data-page="board"' in html
    for table in ('id="cores"', 'id="rails"', 'id="engines"', 'id="temperatures"'):
        assert table in html
    for path in ("/", "/streams", "/models"):
        assert '<a href="/board" data-nav="board">Board</a>' in real_pages.get(path).get_data(
            as_text=True
        )
    for asset in ("/static/js/board.js", "/static/css/board.css"):
        assert real_pages.get(asset).status_code == 200, asset


def test_streams_page_loads_the_health_script_before_its_own(real_pages):
    html = real_pages.get("/streams").get_data(as_text=True)
    health = html.index('<script src="/static/js/stream-health.js" defer></script>')
    assert health < html.index('<script src="/static/js/streams.js" defer></script>')
    for asset in ("/static/js/stream-health.js", "/static/css/streams.css"):
        assert real_pages.get(asset).status_code == 200, asset
