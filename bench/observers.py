"""Issue 12: watching costs the hot path nothing. Lane at c=8 over HTTP on a
daemon of its own (``bench/out/observers/``), in rounds that alternate:
nobody watching, then the dashboard's pages polling the JSON API at the rates
the pages use (web/static/js/) and Prometheus scraping ``/metrics`` every
second. Target: requests/s watched >= 0.95 x unwatched (median of per-round
ratios)."""

from __future__ import annotations

import statistics
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bench.latency import Summary
from bench.load import TritonLoad
from bench.workload import Workload
from daemon_process import DaemonProcess

CONCURRENCY = 8
MAX_CALLS = 200_000
TARGET = 0.95
PAGE_POLLS = (
    ("/api/v1/overview", 2.0),
    ("/api/v1/telemetry?seconds=7", 2.0),
    ("/api/v1/models", 5.0),
    ("/api/v1/streams", 2.0),
    ("/api/v1/events?after=0", 2.0),
)
"""What an open Overview tab and the Events tab ask for, and how often (the
overview loads the 15-minute history once, then asks for the seconds since
its last poll: web/static/js/overview.js)."""
SCRAPE_S = 1.0


class Watchers:
    """One thread per URL, each asking at its interval until ``stop``."""

    def __init__(self, dashboard: str, metrics: str) -> None:
        """``dashboard``: its base URL (``http://host:port``); ``metrics``: host:port."""
        self._targets = [(f"{dashboard}{path}", every) for path, every in PAGE_POLLS]
        self._targets.append((f"http://{metrics}/metrics", SCRAPE_S))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.requests = 0
        self.failures = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._poll, args=target, daemon=True)
            for target in self._targets
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)

    def _poll(self, url: str, every_s: float) -> None:
        while not self._stop.is_set():
            ok = True
            try:
                with urllib.request.urlopen(url, timeout=10) as reply:
                    reply.read()
            except (urllib.error.URLError, OSError):
                ok = False
            with self._lock:
                self.requests += 1
                self.failures += not ok
            self._stop.wait(every_s)


def measure(
    out: Path,
    repository: Path,
    lane: Workload,
    rounds: int,
    round_s: float,
    log: Callable[[str], None] = print,
) -> tuple[dict, list]:
    out.mkdir(parents=True, exist_ok=True)
    daemon = DaemonProcess(
        repository,
        out / "daemon.log",
        [],
        env={"EDGEBOX_DASHBOARD_ANONYMOUS_READ": "true"},
    )
    daemon.start()
    try:
        watchers = Watchers(daemon.dashboard_url, daemon.metrics_url)
        load = TritonLoad(daemon.url, lane)
        load.measure(CONCURRENCY, 1.0, MAX_CALLS)
        quiet, watched = [], []
        for index in range(rounds):
            for mode in ("quiet", "watched") if index % 2 == 0 else ("watched", "quiet"):
                if mode == "watched":
                    watchers.start()
                    watched.append(load.measure(CONCURRENCY, round_s, MAX_CALLS))
                    watchers.stop()
                    log(f"  round {index + 1} watched: {watched[-1].rate_per_s:.0f}/s")
                else:
                    quiet.append(load.measure(CONCURRENCY, round_s, MAX_CALLS))
                    log(f"  round {index + 1} quiet: {quiet[-1].rate_per_s:.0f}/s")
    finally:
        daemon.stop()
    ratios = [w.rate_per_s / q.rate_per_s for w, q in zip(watched, quiet, strict=True)]
    ratio = statistics.median(ratios)
    figures = {
        "quiet": Summary.of(quiet).as_dict(),
        "watched": Summary.of(watched).as_dict(),
        "ratios": [round(r, 3) for r in ratios],
        "watcher_requests": watchers.requests,
        "watcher_failures": watchers.failures,
    }
    log(
        f"lane c=8: {statistics.median(r.rate_per_s for r in watched):.0f}/s watched against "
        f"{statistics.median(r.rate_per_s for r in quiet):.0f}/s quiet (median round ratio "
        f"{ratio:.3f}); the watchers made {watchers.requests} requests, "
        f"{watchers.failures} failed"
    )
    passed = ratio >= TARGET and watchers.failures == 0
    target = (
        "lane c=8 with the dashboard polling and Prometheus scraping >= 0.95 x without",
        passed,
        f"ratio {ratio:.3f}, {watchers.failures} watcher failures",
        ratio / TARGET,
    )
    return figures, [target]
