"""history/ keeps a bounded, downsampled record of the daemon's numbers (each
served version's request figures, the device's telemetry) so the dashboard
can say "is it healthy, and since when" without a Grafana.

Invariant: nothing here runs on a request path or adds a counter. The
sampler's own thread reads what the dataplane's statistics and the telemetry
sampler already keep, at its own pace, and turns cumulative counters into
per-interval figures; memory and disk use are bounded by the tiers'
capacities and ``max_series``.

    settings.py     HistorySettings: the ``history:`` section
    counters.py     CounterReading and IntervalCounts: counter deltas -> figures
    device.py       a telemetry sample flattened into named device columns
    tiers.py        the three tiers (15 min, 1 h, 24 h) and their bounded rings
    store.py        HistoryStore: every series' rings and open buckets
    persistence.py  the coarse tiers on disk (atomic, bounded cadence)
    sampler.py      HistorySampler: the thread, ``sample_once(now)``
    table.py        a tier's series as JSON columns or CSV rows
"""
