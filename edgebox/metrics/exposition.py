"""The text the metrics port answers: Prometheus' text format 0.0.4, as
Triton's endpoint serves it, rendered by prometheus-client except for one
line. Triton declares its counters (``nv_inference_*``, a python model's
``pb_utils.MetricFamily`` COUNTER) ``counter`` under their own names, with no
``_total``; prometheus-client would rename a counter to ``<name>_total``, which
breaks the PromQL of Triton's dashboards and the checks of python_backend's
custom_metrics example. Such a family is a ``TritonCounter``: rendered untyped
(samples under its own name), then its ``# TYPE`` line says ``counter``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PATH = "/metrics"
NOT_FOUND = b"not found: this port serves only /metrics\n"


class TritonCounter(Metric):
    """A counter whose samples keep the family's name, declared ``counter``."""

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation, "unknown")


class _One:
    """One family, in the shape ``generate_latest`` collects from."""

    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self._metric


def render(registry: CollectorRegistry) -> bytes:
    """Every family of ``registry`` in the text format; a ``TritonCounter``'s
    type line says ``counter``. Collects once, on the calling thread."""
    parts = []
    for metric in registry.collect():
        text = generate_latest(_One(metric))
        if isinstance(metric, TritonCounter):
            untyped = f"# TYPE {metric.name} untyped\n".encode()
            text = text.replace(untyped, f"# TYPE {metric.name} counter\n".encode(), 1)
        parts.append(text)
    return b"".join(parts)


def wsgi_app(registry: CollectorRegistry):
    """``GET /metrics`` (any query string, ignored as Triton ignores it): the
    registry rendered; any other path is 404, so the port answers nothing but
    metrics. Triton's port serves only this format, so no OpenMetrics
    negotiation or compression is offered."""

    def app(environ, start_response):
        if environ.get("PATH_INFO", "") != PATH:
            start_response(
                "404 Not Found",
                [
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("Content-Length", str(len(NOT_FOUND))),
                ],
            )
            return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [NOT_FOUND]
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        body = render(registry)
        start_response(
            "200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))]
        )
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    return app
