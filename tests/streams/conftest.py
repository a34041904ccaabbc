from __future__ import annotations

import pytest
from fake_sources import FAST_BACKOFF

from edgebox.streams.manager import StreamManager
from edgebox.streams.settings import StreamSettings
from edgebox.streams.sources import open_source
from fakes import blocking_gate


@pytest.fixture
def run_streams(stack):
    """Start streams on the in-process ``stack`` (repository = tmp_path);
    every manager started is stopped at teardown and must stop in time."""
    managers: list[StreamManager] = []

    def start(*configs: StreamSettings, opener=open_source, backoff=FAST_BACKOFF):
        manager = StreamManager(
            configs, stack.dataplane, stack.bus, open_source=opener, backoff=backoff
        )
        managers.append(manager)
        manager.start()
        return manager

    yield start
    blocking_gate.release.set()
    for manager in managers:
        assert manager.stop(10), "a stream did not stop within 10 s"
