"""Who may operate on a model now: one control operation (load, unload,
forget) per model at a time, and the loads in progress that an unload of
their model, or shutdown, cancels.

Operations on different models run side by side, so a slow load (a long
warm-up, a python model's ``initialize``) never holds up another model's load
or unload, nor shutdown. A cancelled load is told so at its next checkpoint
(before a warm-up request or an instance, before publishing); what runs inside
a backend meanwhile cannot be interrupted, so shutdown waits for an operation
only up to a deadline (``enter`` with ``timeout_s``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from edgebox.errors import Unavailable
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.states import ModelState


class LoadInProgress:
    """One load in progress. An unload of its model, or shutdown, sets
    ``reason``; the loading thread sees it at its next checkpoint."""

    __slots__ = ("name", "reason", "version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.reason = ""
        self.version: int | None = None
        """The version being built, whose state a cancellation turns UNLOADING."""


class ModelOperations:
    """The per-model operation lock and the cancellation of loads.
    Thread-safe: the HTTP threads, the poller, the startup loader and shutdown
    all call in; the loading threads ask whether they were cancelled."""

    def __init__(self, registry: ModelRegistry) -> None:
        self._registry = registry
        self._lock = threading.Lock()
        """Held only for bookkeeping, never across an operation: guards the
        fields below, and makes a cancellation and the step a load checks it
        for (``begin_version``, ``uncancelled``) happen one after the other."""
        self._changed = threading.Condition(self._lock)
        """Notified when a model's operation ends or a load is cancelled."""
        self._busy: set[str] = set()
        """Models with a control operation running."""
        self._loads: dict[str, list[LoadInProgress]] = {}
        self._closing = ""
        """Why no load may start any more (shutdown), or empty."""

    @property
    def closing(self) -> str:
        return self._closing

    def enter(
        self, name: str, load: LoadInProgress | None = None, timeout_s: float | None = None
    ) -> bool:
        """Become the one operation on ``name``, waiting (up to ``timeout_s``)
        for the one before; False at the timeout. A ``load`` cancelled while
        waiting raises Unavailable instead of going on."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._changed:
            while name in self._busy:
                if load is not None and self.cancelled(load):
                    raise Unavailable(f"model '{name}': load cancelled: {self.cancelled(load)}")
                remaining = remaining_s(deadline)
                if remaining == 0.0:
                    return False
                self._changed.wait(remaining)
            self._busy.add(name)
            return True

    def leave(self, name: str) -> None:
        with self._changed:
            self._busy.discard(name)
            self._changed.notify_all()

    @contextlib.contextmanager
    def operating(self, name: str, load: LoadInProgress | None = None) -> Iterator[None]:
        """The block as the one operation on ``name`` (waiting with no limit)."""
        self.enter(name, load)
        try:
            yield
        finally:
            self.leave(name)

    @contextlib.contextmanager
    def loading(self, name: str) -> Iterator[LoadInProgress]:
        """The block as the one operation on ``name``, and a load that
        ``cancel_loads`` and ``stop_loading`` reach from the moment it waits
        for its turn. Unavailable at once after ``stop_loading``."""
        load = LoadInProgress(name)
        with self._lock:
            if self._closing:
                raise Unavailable(f"model '{name}': not loaded: {self._closing}")
            self._loads.setdefault(name, []).append(load)
        try:
            with self.operating(name, load):
                yield load
        finally:
            with self._lock:
                loads = self._loads.get(name, [])
                loads.remove(load)
                if not loads:
                    self._loads.pop(name, None)

    def cancel_loads(self, name: str, reason: str) -> None:
        """Stop the loads of ``name`` in progress now (not those that start
        later), so an unload never waits out a warm-up."""
        with self._lock:
            for load in self._loads.get(name, []):
                self._cancel(load, reason)
            self._changed.notify_all()

    def stop_loading(self, reason: str) -> None:
        """No load starts from now on, and those in progress are cancelled."""
        with self._lock:
            self._closing = reason
            for loads in self._loads.values():
                for load in loads:
                    self._cancel(load, reason)
            self._changed.notify_all()

    def _cancel(self, load: LoadInProgress, reason: str) -> None:
        """Under ``_lock``. The version being built shows UNLOADING at once."""
        if load.reason:
            return
        load.reason = reason
        if load.version is not None:
            self._registry.set_status(load.name, load.version, ModelState.UNLOADING, reason)

    def cancelled(self, load: LoadInProgress) -> str:
        """Why ``load`` must stop, or empty."""
        return load.reason or self._closing

    def check_cancelled(self, load: LoadInProgress, where: str) -> None:
        reason = self.cancelled(load)
        if reason:
            raise Unavailable(f"{where}: load cancelled: {reason}")

    def begin_version(self, load: LoadInProgress, version: int, where: str) -> None:
        """``load`` starts building ``version``, shown LOADING; Unavailable if
        it was cancelled. One step under ``_lock``, so a cancellation either
        comes first or sees the version and turns it UNLOADING."""
        with self._lock:
            cancelled = self.cancelled(load)
            if not cancelled:
                load.version = version
                self._registry.set_status(load.name, version, ModelState.LOADING)
        if cancelled:
            raise Unavailable(f"{where}: load cancelled: {cancelled}")

    @contextlib.contextmanager
    def uncancelled(self, load: LoadInProgress) -> Iterator[str]:
        """Yields why ``load`` was cancelled (empty if it was not) and holds
        cancellations off until the block ends: a step taken in the block when
        the reason is empty (publishing the version) is never followed by a
        cancellation that had given up waiting for it."""
        with self._lock:
            yield self.cancelled(load)


def remaining_s(deadline: float | None) -> float | None:
    """Seconds left until a ``time.monotonic()`` deadline, never negative;
    None (no limit) for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())
