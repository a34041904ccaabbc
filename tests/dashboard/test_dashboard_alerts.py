"""``GET /api/v1/alerts``: the active alerts the banner shows, under the
same login rules as every other read (edgebox/dashboard/alerts_api.py)."""

from __future__ import annotations

from dashboard_client import dashboard_deps, log_in

from edgebox.alerts.alert import Alert

NEEDS_LOGIN = {"error": "the dashboard needs a login (POST /login)"}


class FakeAlertSource:
    """The evaluator's ``snapshot()``, set by the test."""

    def __init__(self, *alerts: Alert) -> None:
        self.alerts = list(alerts)

    def snapshot(self) -> list[Alert]:
        return list(self.alerts)


HOT = Alert("temperature", "gpu", "critical", "zone 'gpu' at 92.0 °C", 1_700_000_000.5)
DOWN = Alert("stream_down", "road", "warn", "stream 'road' reconnecting for 31 s", 1_700_000_001.0)


def test_the_active_alerts_are_listed_as_the_evaluator_orders_them(make_app, stack):
    source = FakeAlertSource(HOT, DOWN)
    client = make_app(deps=dashboard_deps(stack, alerts=source), anonymous_read=True).test_client()
    reply = client.get("/api/v1/alerts")
    assert reply.status_code == 200
    assert reply.get_json() == {"alerts": [HOT.as_dict(), DOWN.as_dict()], "enabled": True}
    assert reply.get_json()["alerts"][0] == {
        "rule": "temperature",
        "subject": "gpu",
        "severity": "critical",
        "message": "zone 'gpu' at 92.0 °C",
        "since": 1_700_000_000.5,
    }
    source.alerts = []
    assert client.get("/api/v1/alerts").get_json() == {"alerts": [], "enabled": True}


def test_with_alerts_off_the_list_is_empty_and_says_so(make_app, stack):
    client = make_app(deps=dashboard_deps(stack), anonymous_read=True).test_client()
    assert client.get("/api/v1/alerts").get_json() == {"alerts": [], "enabled": False}


def test_without_anonymous_read_the_alerts_need_a_login(make_app, stack):
    client = make_app(deps=dashboard_deps(stack, alerts=FakeAlertSource(HOT))).test_client()
    reply = client.get("/api/v1/alerts")
    assert (reply.status_code, reply.get_json()) == (401, NEEDS_LOGIN)
    log_in(client)
    assert client.get("/api/v1/alerts").get_json()["alerts"] == [HOT.as_dict()]
