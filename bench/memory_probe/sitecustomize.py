"""Loaded by every Python started with this folder on ``PYTHONPATH``; does
nothing unless ``EDGEBOX_MEMORY_PROBE`` names a folder. Then it traces
allocations (``tracemalloc``, deep enough to find the edgebox module behind
a library's allocation) and, at each SIGUSR2 (which the daemon does not use),
writes ``snapshot-N.json`` there (N counting from 1): the traced bytes by
component (``bench.memory_budget.component_of``) and the process's RSS.

A bench instrument, never installed: tracing every allocation slows the
daemon several times over.
"""

from __future__ import annotations

import os

# Popped: the daemon's own children (isolated python models) are not traced.
_FOLDER = os.environ.pop("EDGEBOX_MEMORY_PROBE", None)

if _FOLDER:
    import json
    import signal
    import sys
    import threading
    import tracemalloc
    from pathlib import Path

    tracemalloc.start(int(os.environ.get("EDGEBOX_MEMORY_PROBE_FRAMES", "30")))

    def _rss_bytes() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def _take(path: Path) -> None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from bench.memory_budget import component_of

        # Before the snapshot, which is itself large while it is summed up.
        rss, tracer = _rss_bytes(), tracemalloc.get_tracemalloc_memory()
        snapshot = tracemalloc.take_snapshot()
        sizes: dict[str, int] = {}
        for statistic in snapshot.statistics("traceback"):
            name = component_of([frame.filename for frame in statistic.traceback])
            sizes[name] = sizes.get(name, 0) + statistic.size
        answer = {
            "rss": rss,
            "tracer": tracer,
            "traced": sum(sizes.values()),
            "components": sizes,
        }
        path.with_suffix(".tmp").write_text(json.dumps(answer))
        path.with_suffix(".tmp").rename(path)

    _asked = threading.Semaphore(0)

    def _watch() -> None:
        folder = Path(_FOLDER)
        number = 0
        while True:
            _asked.acquire()
            number += 1
            path = folder / f"snapshot-{number}.json"
            try:
                _take(path)
            except Exception as error:  # a probe must never take the daemon down
                path.write_text(json.dumps({"error": repr(error)}))

    signal.signal(signal.SIGUSR2, lambda signum, frame: _asked.release())
    threading.Thread(target=_watch, name="memory-probe", daemon=True).start()
