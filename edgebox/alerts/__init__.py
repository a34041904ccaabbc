"""alerts/ turns telemetry and the bus's events into a few alerts an operator
sees: the dashboard's banner, MQTT ``events`` (``edgebox.alert``) and
``edgebox_alerts_active`` (docs/dashboard.md, "Alerts").

Invariant: alerts are judged on their own thread at their own pace
(``alerts.interval_s``), from what telemetry already sampled and events
already published; nothing here runs on, or waits for, the inference path.
Each rule clears with hysteresis, so an alert does not flap, and every map
of subjects is bounded.

    settings.py     AlertSettings: the ``alerts:`` section
    alert.py        Alert (one active alert) and Finding (a rule's verdict)
    level.py        LevelTracker: thresholds with a clear margin and a hold time
    rules/          one module per rule; ``rule_set.py`` builds the enabled ones
    active.py       ActiveAlerts: the active set, and the events its changes make
    evaluator.py    AlertEvaluator: the thread that feeds the rules and publishes
"""
