"""Retirement of versions that stop serving (unloaded, replaced by a reload,
their folder removed, no longer selected by ``version_policy``).

A retired version is withdrawn from the registry at once, so no new request
reaches it, and closed on a thread of its own once its in-flight requests
have finished (Triton's ``ModelDeleter``): no control operation waits on a
slow request, and no request loses its model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from edgebox.lifecycle.operations import remaining_s
from edgebox.lifecycle.registry import ModelRegistry, ServedModel
from edgebox.lifecycle.states import ModelState

REPLACED = "replaced by a reload"
"""Retirement reason of a version a newer load of the same number replaced:
it sets no state, the new load owns it."""
FOLDER_REMOVED = "version folder removed"
"""Retirement reason of a version whose folder is gone: its state is dropped
once it is closed."""


class VersionRetirer:
    """Withdraws versions and closes them once drained. Thread-safe: the
    control operations retire, one ``retire-<model>-<version>`` thread per
    version drains and closes, and shutdown waits for them."""

    def __init__(self, registry: ModelRegistry, close: Callable[[ServedModel], None]) -> None:
        """``close``: closes a drained version and gives back what it held;
        called on the retire thread, it must not raise."""
        self._registry = registry
        self._close = close
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def retire_model(self, name: str, reason: str) -> None:
        """Retire every version of ``name`` now serving, for one reason."""
        self.retire_versions(name, dict.fromkeys(self._registry.served_versions(name), reason))

    def retire_versions(self, name: str, reasons: dict[int, str]) -> None:
        """Withdraw these versions in one step (so requests never fall back to
        another version that is leaving too), then retire each."""
        for served in self._registry.withdraw(name, list(reasons)):
            self.retire(served, reasons[served.version])

    def retire(self, served: ServedModel, reason: str) -> None:
        """Close ``served`` once its in-flight requests finish, off this thread.
        The caller has already withdrawn it from the registry.

        Its state afterwards: none for a version whose folder is gone, none to
        set for one replaced by a reload, UNAVAILABLE with ``reason`` otherwise;
        never over a newer load of the same version number.
        """
        replaced = reason == REPLACED
        if not replaced:
            self._registry.set_status(served.name, served.version, ModelState.UNLOADING, reason)

        def drain_and_close() -> None:
            # A decoupled model may hold a request for ever; past a grace it fails.
            grace = getattr(served.scheduler, "unload_grace_s", None)
            if not served.wait_drained(grace):
                served.scheduler.abandon(f"the version was retired ({reason})")
                served.wait_drained()
            self._close(served)
            if replaced or served.version in self._registry.served_versions(served.name):
                return
            if reason == FOLDER_REMOVED:
                self._registry.clear_status(served.name, served.version)
            else:
                self._registry.set_status(
                    served.name, served.version, ModelState.UNAVAILABLE, reason
                )

        thread = threading.Thread(
            target=drain_and_close, name=f"retire-{served.name}-{served.version}", daemon=True
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait (up to ``timeout_s`` in all) for every version retired so far
        to be closed; False if any is still draining or closing."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(remaining_s(deadline))
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            return not self._threads
