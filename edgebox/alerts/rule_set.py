"""The rules the ``alerts:`` section turns on, built once at start."""

from __future__ import annotations

from collections.abc import Callable

from edgebox.alerts.rules.base import Rule
from edgebox.alerts.rules.memory import MemoryRule
from edgebox.alerts.rules.model_unavailable import ModelUnavailableRule
from edgebox.alerts.rules.mqtt_offline import MqttOfflineRule
from edgebox.alerts.rules.rollout_rejected import RolloutRejectedRule
from edgebox.alerts.rules.spool_fill import SpoolFillRule
from edgebox.alerts.rules.stream_down import StreamDownRule
from edgebox.alerts.rules.temperature import TemperatureRule
from edgebox.alerts.rules.throttling import ThrottlingRule
from edgebox.alerts.settings import AlertSettings


def build_rules(
    settings: AlertSettings,
    spool_capacity_bytes: int | None,
    has_model_status: Callable[[str, int | None], bool] | None = None,
) -> list[Rule]:
    """Every rule switched on; ``spool_capacity_bytes`` None (MQTT off)
    leaves out the rules about MQTT. ``has_model_status``: the registry's
    (``ModelUnavailableRule``)."""
    rules: list[Rule] = []
    if settings.temperature:
        rules.append(
            TemperatureRule(
                settings.temperature_warn_c,
                settings.temperature_critical_c,
                settings.temperature_clear_c,
                settings.temperature_for_s,
                settings.zone_max_c,
            )
        )
    if settings.throttling:
        rules.append(ThrottlingRule())
    if settings.memory:
        rules.append(
            MemoryRule(
                settings.memory_warn_pct,
                settings.memory_critical_pct,
                settings.memory_clear_pct,
                settings.memory_for_s,
            )
        )
    if settings.stream_down:
        rules.append(StreamDownRule(settings.stream_down_after_s))
    if settings.model_unavailable:
        rules.append(ModelUnavailableRule(has_model_status))
    if settings.rollout_rejected:
        rules.append(RolloutRejectedRule(settings.rollout_rejected_clear_after_s))
    if spool_capacity_bytes is not None:
        if settings.mqtt_offline:
            rules.append(MqttOfflineRule(settings.mqtt_offline_after_s))
        if settings.spool:
            rules.append(
                SpoolFillRule(
                    settings.spool_warn_pct, settings.spool_clear_pct, spool_capacity_bytes
                )
            )
    return rules
