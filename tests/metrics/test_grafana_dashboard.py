"""docs/grafana/edgebox-fleet.json against what a device really exports: a
real daemon (add_sub with traffic, telemetry read from an AGX Orin shaped
sysfs tree, MQTT to a real mosquitto, the fleet agent on) scraped by Debian's
``prometheus`` through file-based service discovery, and every PromQL
expression of the dashboard asked of that Prometheus. A misspelled metric or
label, or a query Prometheus cannot parse, fails here instead of showing an
empty panel on an operator's screen.

Grafana's own template variables are replaced by concrete values as Grafana
would: ``$device`` by the scraped device's ``device`` target label,
``$model`` by ``add_sub``, ``$__rate_interval`` by ``1m``."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from daemon_process import DaemonProcess, wait_for
from edgebox.fleet.signing import generate_key
from fleet_sim.prometheus import Prometheus, prometheus_binary
from model_fixtures import add_add_sub, add_sub_infer_inputs
from mosquitto_broker import daemon_mqtt_flags

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs/grafana/edgebox-fleet.json"
ORIN_TREE = ROOT / "tests/telemetry/fixtures/agx_orin"
DEVICE = "orin-07"
MODEL = "add_sub"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

MAY_BE_EMPTY = {
    "edgebox_fleet_models": "a model appears only once a desired-state document names it; "
    "the test deploys none",
    "edgebox_rollout_state": "a model appears only after its first rollout; the test runs none",
    "nv_cpu_utilization": "a load needs two proc/stat reads that differ; the Orin "
    "tree's never changes",
    "edgebox_emc_utilization": "the sysfs source cannot read EMC load (debugfs needs root); "
    "jetson-stats can",
}
"""Families the dashboard shows that this device legitimately lacks: an
expression naming one is only checked to parse."""

pytestmark = pytest.mark.skipif(
    prometheus_binary() is None,
    reason="Debian's prometheus is not installed (`make prometheus` installs it)",
)


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels(board: dict) -> list[dict]:
    """Every panel, those inside collapsed rows included."""
    found = []
    for panel in board["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def expressions(board: dict) -> list[tuple[str, str]]:
    return [
        (f"{panel['title']}/{target['refId']}", target["expr"])
        for panel in panels(board)
        for target in panel.get("targets", [])
    ]


def variable_selectors(board: dict) -> list[tuple[str, str, str]]:
    """``label_values(SELECTOR, LABEL)`` of each query variable, as
    ``(variable, SELECTOR, LABEL)``: Grafana asks Prometheus for SELECTOR's
    series and offers their LABEL values."""
    found = []
    for variable in board["templating"]["list"]:
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"]["query"])
        assert match, f"variable {variable['name']}: not a label_values() query"
        found.append((variable["name"], match.group(1), match.group(2)))
    return found


def concrete(expr: str) -> str:
    return (
        expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "1m")
        .replace("$device", DEVICE)
        .replace("$model", MODEL)
    )


def optional_reason(expr: str) -> str | None:
    for family, reason in MAY_BE_EMPTY.items():
        if re.search(rf"\b{family}\b", expr):
            return reason
    return None


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, session_mosquitto):
    """Prometheus scraping one device that has served add_sub between scrapes,
    so every counter's ``rate()`` has two samples to work from."""
    work = tmp_path_factory.mktemp("grafana")
    add_add_sub(work / "repo")
    sysfs = Path(shutil.copytree(ORIN_TREE, work / "agx_orin"))
    (work / "keys").mkdir()
    public = generate_key(work / "keys/release")
    args = [
        "--telemetry-source", "sysfs",
        "--telemetry-sysfs-root", str(sysfs),
        "--telemetry-interval-s", "0.5",
        *daemon_mqtt_flags(session_mosquitto.url, f"grafana-{uuid.uuid4().hex[:8]}", work / "spool.sqlite"),
        "--fleet-group", f"grafana-{work.name}",
        "--fleet-trusted-keys", str(public),
        "--fleet-download-dir", str(work / "downloads"),
        "--dashboard-enabled", "false",
    ]  # fmt: skip
    with (
        DaemonProcess(work / "repo", work / "daemon.log", args) as daemon,
        Prometheus(work / "prometheus") as running,
    ):
        running.set_targets({DEVICE: daemon.metrics_url})
        client = httpclient.InferenceServerClient(daemon.url)
        ones = np.ones((1, 16), dtype=np.float32)
        served = f'nv_inference_request_success{{device="{DEVICE}", model="{MODEL}"}}[1m]'

        def traffic_seen_between_scrapes() -> bool:
            client.infer(MODEL, add_sub_infer_inputs(httpclient, ones, ones))
            return bool(running.query(f"changes({served}) > 0"))

        wait_for(traffic_seen_between_scrapes, 60, 0.2, what="Prometheus to see add_sub served")
        wait_for(
            lambda: running.query(f'edgebox_temperature_celsius{{device="{DEVICE}"}}'),
            30,
            what="a telemetry sample scraped",
        )
        yield running


def test_the_dashboard_is_an_importable_grafana_dashboard():
    board = dashboard()
    assert board["schemaVersion"] >= 36
    assert [entry["name"] for entry in board["__inputs"]] == ["DS_PROMETHEUS"]
    assert board["__inputs"][0]["pluginId"] == "prometheus"
    ids = [panel["id"] for panel in panels(board)]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    for panel in panels(board):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), f"{panel['title']}: refIds repeat"
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert set(variables) == {"device", "model"}
    for variable in variables.values():
        assert variable["datasource"] == DATASOURCE


def test_every_series_query_filters_by_the_device_variable():
    """A panel that ignored ``$device`` would show the whole fleet whatever
    the operator picked."""
    for where, expr in expressions(dashboard()):
        for selector in re.findall(r"\w+\{[^}]*\}", expr):
            assert 'device=~"$device"' in selector, f"{where}: {selector}"


@pytest.mark.parametrize(
    ("where", "expr"), [pytest.param(w, e, id=w) for w, e in expressions(dashboard())]
)
def test_each_panel_query_runs_against_a_scraped_device(prometheus, where, expr):
    result = prometheus.query(concrete(expr))
    reason = optional_reason(expr)
    if reason is None:
        assert result, f"{where}: {expr} returned no series from a device that exports it"


@pytest.mark.parametrize(
    ("name", "selector", "label"),
    [pytest.param(*variable, id=variable[0]) for variable in variable_selectors(dashboard())],
)
def test_each_variable_offers_the_scraped_device_and_model(prometheus, name, selector, label):
    values = {labels.get(label) for labels, _ in prometheus.query(concrete(selector))}
    expected = {"device": DEVICE, "model": MODEL}[name]
    assert expected in values, f"${name}: {selector} offers {values}"
