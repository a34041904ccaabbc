"""dashboard/ is the web dashboard: a Flask app (``create_app``) built from the
daemon's parts passed in (``DashboardDeps``), with blueprints for the JSON API,
the pages and the login, served by waitress on its own port
(``DashboardServer``). See docs/dashboard.md.

Invariant: the dashboard only reads what the daemon already keeps (the
registry, statistics, stream status and latest frames, the telemetry ring, the
bus) and calls the dataplane's and repository control's verbs; nothing it does runs on a request or
stream thread, and it adds no work to the inference path beyond one bus
subscription. This package's ``__init__`` imports nothing, so reading the
settings never imports Flask.
"""
