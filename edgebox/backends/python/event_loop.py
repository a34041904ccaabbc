"""The asyncio loop of one python model instance (``async def execute``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from typing import Any

_log = logging.getLogger("edgebox.backends.python")


class EventLoop:
    """The asyncio loop an instance's ``async def execute`` runs on, as
    python_backend keeps one per stub process: one loop per instance, on a
    thread of its own (the calls reach the instance on varying threads), for
    the instance's lifetime, so objects a coroutine binds to the loop stay
    usable across calls.

    A non-decoupled execute is waited for (``run``): the calling thread
    blocks, the instance stays busy, as under Triton; other instances and
    models run meanwhile, and its ``async_exec`` calls run at once. A
    decoupled execute is started (``start``) and left running: the instance
    takes its next call while it awaits, so one instance holds many requests.
    """

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def run(self, coroutine: Any) -> Any:
        """Run ``coroutine`` to its end; its result, or what it raised."""
        return self.start(coroutine).result()

    def start(self, coroutine: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel what still runs, let the cancelled coroutines and the BLS
        threads finish (up to ``timeout_s`` each), then stop the loop."""

        async def shutdown() -> None:
            current = asyncio.current_task()
            tasks = [task for task in asyncio.all_tasks() if task is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._loop.shutdown_default_executor()

        try:
            self.start(shutdown()).result(timeout_s)
        except BaseException as exc:
            _log.error("stopping the event loop '%s' failed: %r", self._thread.name, exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._loop.close()
