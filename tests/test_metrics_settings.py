"""``allow_metrics`` and ``metrics_address`` (Triton's ``--allow-metrics`` and
``--metrics-address``): defaults, the file, ``EDGEBOX_*`` and the flags in
their layering order, and what ``edgebox check`` says about them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgebox.cli import build_parser, main
from edgebox.commands.console import EXIT_CONFIG
from edgebox.settings import SettingsError, load_settings
from edgebox.settings import loader as settings_module


@pytest.fixture(autouse=True)
def no_settings_from_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "DEFAULT_CONFIG_FILE", tmp_path / "absent.yaml")
    for name in list(os.environ):
        if name.startswith("EDGEBOX_"):
            monkeypatch.delenv(name)


def serve_flags(*argv: str) -> dict:
    """The flags ``edgebox serve`` hands to ``load_settings`` for ``argv``."""
    args = build_parser().parse_args(["serve", *argv])
    return {k: v for k, v in vars(args).items() if k not in ("command", "config")}


def test_metrics_are_on_and_on_the_host_address_by_default() -> None:
    settings = load_settings({}, environ={})
    assert settings.allow_metrics is True
    assert settings.metrics_address == ""
    assert settings.resolved_metrics_address == "0.0.0.0"
    assert load_settings({"host": "10.0.0.5"}, environ={}).resolved_metrics_address == "10.0.0.5"


def test_each_layer_overrides_the_one_before_for_the_metrics_switch(tmp_path: Path) -> None:
    config = tmp_path / "edgebox.yaml"
    config.write_text("allow_metrics: false\nmetrics_address: 10.0.0.5\n", encoding="utf-8")

    from_file = load_settings({}, config, environ={})
    assert (from_file.allow_metrics, from_file.metrics_address) == (False, "10.0.0.5")
    assert from_file.sources["allow_metrics"] == str(config)

    environ = {"EDGEBOX_ALLOW_METRICS": "true", "EDGEBOX_METRICS_ADDRESS": "127.0.0.1"}
    from_env = load_settings({}, config, environ=environ)
    assert (from_env.allow_metrics, from_env.metrics_address) == (True, "127.0.0.1")
    assert from_env.sources["metrics_address"] == "EDGEBOX_METRICS_ADDRESS"

    flags = serve_flags("--allow-metrics", "false", "--metrics-address", "::1")
    from_flags = load_settings(flags, config, environ=environ)
    assert (from_flags.allow_metrics, from_flags.metrics_address) == (False, "::1")
    assert from_flags.sources["allow_metrics"] == "--allow-metrics"
    assert from_flags.resolved_metrics_address == "::1"


def test_allow_metrics_refuses_a_word_that_is_not_a_boolean() -> None:
    with pytest.raises(SettingsError) as info:
        load_settings({}, environ={"EDGEBOX_ALLOW_METRICS": "sometimes"})
    assert str(info.value) == (
        "setting 'allow_metrics' from EDGEBOX_ALLOW_METRICS: expected bool, got 'sometimes'"
    )


def test_serve_names_the_allow_metrics_flag_in_its_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--allow-metrics", "maybe"]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        "edgebox: setting 'allow_metrics' from --allow-metrics: expected bool, got 'maybe'\n"
    )


def test_dashboard_may_take_the_metrics_port_while_metrics_are_off() -> None:
    flags = {"dashboard_port": "8002"}
    with pytest.raises(SettingsError) as info:
        load_settings(flags, environ={})
    assert "must differ from http_port, grpc_port and metrics_port, got 8002" in str(info.value)
    settings = load_settings({**flags, "allow_metrics": "false"}, environ={})
    assert settings.dashboard.port == 8002


def test_check_summary_says_metrics_are_off_or_where_they_bind(tmp_path: Path) -> None:
    from edgebox.commands.check import _summary

    off = load_settings({"allow_metrics": "false"}, environ={})
    assert "ports http 8000, grpc 8001, metrics off, dashboard 8080;" in _summary(off)
    local = load_settings({"metrics_address": "127.0.0.1"}, environ={})
    assert "ports http 8000, grpc 8001, metrics 127.0.0.1:8002, dashboard 8080;" in _summary(
        local
    )
    assert "metrics 8002, dashboard" in _summary(load_settings({}, environ={}))


def test_gpu_and_cpu_metric_switches_layer_like_the_others(tmp_path: Path) -> None:
    defaults = load_settings({}, environ={})
    assert (defaults.allow_gpu_metrics, defaults.allow_cpu_metrics) == (True, True)
    config = tmp_path / "edgebox.yaml"
    config.write_text("allow_gpu_metrics: false\n", encoding="utf-8")
    environ = {"EDGEBOX_ALLOW_CPU_METRICS": "false"}

    layered = load_settings({}, config, environ=environ)
    assert (layered.allow_gpu_metrics, layered.allow_cpu_metrics) == (False, False)
    assert layered.sources["allow_cpu_metrics"] == "EDGEBOX_ALLOW_CPU_METRICS"

    flags = serve_flags("--allow-gpu-metrics", "true", "--allow-cpu-metrics", "true")
    from_flags = load_settings(flags, config, environ=environ)
    assert (from_flags.allow_gpu_metrics, from_flags.allow_cpu_metrics) == (True, True)
    assert from_flags.sources["allow_gpu_metrics"] == "--allow-gpu-metrics"
