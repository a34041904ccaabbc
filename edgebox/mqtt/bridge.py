"""How the daemon's parts feed MQTT: the forwarder built from settings, the
status document's view of models and streams, and the tap that turns a
client's answer from an opted-in model into a ``ModelResult`` event."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from edgebox import __version__
from edgebox.dataplane import ResultTap
from edgebox.events import EventBus, ModelResult
from edgebox.lifecycle.registry import ModelRegistry, ServedModel
from edgebox.log_limiter import LogLimiter
from edgebox.mqtt.forwarder import MqttForwarder
from edgebox.mqtt.routing import ResultPace, Router
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.topics import Topics
from edgebox.streams.settings import StreamSettings
from edgebox.summaries import SummaryError, rule_of, summarize
from edgebox.summaries.tensors import full_tensor
from edgebox.tensors import InferResponse

log = logging.getLogger("edgebox.mqtt")


def build_forwarder(
    settings: MqttSettings,
    bus: EventBus,
    registry: ModelRegistry,
    streams: tuple[StreamSettings, ...],
    stream_states: Callable[[], dict[str, str]],
) -> MqttForwarder:
    device = settings.resolved_device_id
    router = build_router(settings, streams)
    identity = {"device": device, "edgebox_version": __version__, "started_at": time.time()}

    def serving() -> dict[str, Any]:
        models = {
            name: {"ready_versions": sorted(str(v) for v in registry.served_versions(name))}
            for name in registry.model_names()
        }
        return {"models": models, "streams": stream_states()}

    return MqttForwarder(settings, bus, router, identity, serving)


def build_router(settings: MqttSettings, streams: tuple[StreamSettings, ...]) -> Router:
    """Topics, QoS and each stream's pace; built again when a settings
    reload changes any of them (``MqttForwarder.reconfigure``)."""
    device = settings.resolved_device_id
    paces = {
        stream.name: ResultPace(stream.results_every_n, stream.max_results_per_s)
        for stream in streams
    }
    return Router(Topics(settings.topic_prefix, device), device, settings.qos, paces)


def result_tap(bus: EventBus) -> ResultTap:
    """Summarises on the request's thread (the rule is cheap next to the
    inference it follows; see bench/RESULTS.md) and puts the event on the bus,
    which never blocks."""
    limiter = LogLimiter(60.0)

    def tap(served: ServedModel, response: InferResponse) -> None:
        try:
            if served.publishing.full_outputs:
                outputs = {t.name: full_tensor(t) for t in response.outputs}
            else:
                outputs = summarize(response.outputs, rule_of(served.config))
        except SummaryError as exc:
            if limiter.allow(served.name) is not None:
                log.warning("%s: result not published: %s", served.where, exc)
            return
        bus.publish(
            ModelResult(served.name, str(served.version), response.id, time.time(), outputs)
        )

    return tap
