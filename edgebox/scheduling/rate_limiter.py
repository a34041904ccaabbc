"""Triton's rate limiter (``--rate-limit execution_count``): a model instance
runs only once the resources its ``instance_group { rate_limiter { ... } }``
names are free, so on an Orin, where the GPU and both DLA cores are shared by
every model, a big model cannot starve a small one, nor several models run at
once that together do not fit in memory.

Resources are counted per device (an instance's ``device_id``), or once for
the whole module when marked ``global``. How many copies of each exist is
``--rate-limit-resource NAME:COUNT[:DEVICE]`` where given (no DEVICE: every
device), else the most any registered instance asks for, so every instance can
run. A resource given on the command line must cover every instance needing
it: an instance asking for more than exists could never run, so its version
fails to load with Triton's reason, as does a resource named both global and
per device.

Instances waiting for resources queue in one order across all models: fewest
``executions x priority`` first (priority 0 counts as 1), then arrival. Only
the first may take its resources: a big instance at the head is not overtaken
by small ones that happen to fit, which is what keeps it from starving. So an
instance with ``priority: 2`` gets about half the turns of one with priority 1
when both wait. As in Triton, a model that calls another model from
``execute`` (python BLS) while both need the last copies of one resource
waits forever: give such models separate resources.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/rate_limiter.md
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from edgebox.errors import Cancelled, InvalidArgument

GLOBAL = "global"
"""The device key of a ``global: true`` resource: one pool for the module."""

RATE_LIMIT_MODES = ("off", "execution_count")


@dataclass(frozen=True)
class ResourceGiven:
    """One ``--rate-limit-resource NAME:COUNT[:DEVICE]``; ``device`` None
    means every device."""

    name: str
    count: int
    device: int | None = None

    @classmethod
    def parse(cls, text: str) -> ResourceGiven:
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[0].strip():
            raise ValueError(f"'{text}': expected NAME:COUNT or NAME:COUNT:DEVICE")
        numbers = parts[1:]
        if not all(part.isdigit() for part in numbers):
            raise ValueError(f"'{text}': COUNT and DEVICE must be whole numbers")
        device = int(parts[2]) if len(parts) == 3 else None
        return cls(parts[0], int(parts[1]), device)


@dataclass(eq=False)
class Claim:
    """What one instance needs before it may execute, and how often it has:
    the rate limiter's whole view of it."""

    where: str
    needs: dict[tuple[object, str], int]
    """(device or GLOBAL, resource name) -> copies held while executing."""
    priority: int = 1
    executions: int = 0
    cancel: threading.Event = field(default_factory=threading.Event)
    """Set when the instance's version closes: a waiter gives up."""


def claim_for(where: str, device_id: int, resources: Iterable, priority: int) -> Claim:
    """The claim of an instance on ``device_id`` from its group's
    ``rate_limiter`` (``resources`` as (name, count, global) triples)."""
    needs: dict[tuple[object, str], int] = {}
    for name, count, is_global in resources:
        key = (GLOBAL if is_global else device_id, name)
        needs[key] = needs.get(key, 0) + count
    return Claim(where, needs, max(priority, 1))


class RateLimiter:
    """Shared by every model of the daemon. Thread-safe: the schedulers'
    threads wait in ``running``; loads register and closing versions
    unregister."""

    def __init__(self, given: Iterable[ResourceGiven] = ()) -> None:
        self._given = tuple(given)
        self._lock = threading.Condition()
        self._claims: list[Claim] = []
        self._limits: dict[tuple[object, str], int] = {}
        self._in_use: dict[tuple[object, str], int] = {}
        self._waiting: list[tuple[int, int, Claim]] = []
        self._arrivals = itertools.count()

    def register(self, claims: list[Claim]) -> None:
        """Count a version's instances in; raises InvalidArgument, with
        Triton's words, when they could never run, and then registers none."""
        with self._lock:
            limits = self._limits_for(self._claims + claims)
            self._claims.extend(claims)
            self._limits = limits

    def unregister(self, claims: list[Claim]) -> None:
        """Count a closing version's instances out; one still waiting gives up."""
        with self._lock:
            for claim in claims:
                claim.cancel.set()
                if claim in self._claims:
                    self._claims.remove(claim)
            self._limits = self._limits_for(self._claims)
            self._lock.notify_all()

    def limits(self) -> dict[tuple[object, str], int]:
        """Copies of each resource, by (device or GLOBAL, name)."""
        with self._lock:
            return dict(self._limits)

    def waiting(self) -> list[str]:
        """Who waits for resources, in the order they will get them."""
        with self._lock:
            return [claim.where for _, _, claim in sorted(self._waiting, key=lambda e: e[:2])]

    @contextmanager
    def running(self, claim: Claim) -> Iterator[None]:
        """Hold the claim's resources for the ``with`` body, after every
        instance ahead of it in the queue took theirs. Raises Cancelled
        (nothing held) when the instance's version closes meanwhile."""
        self._take(claim)
        try:
            yield
        finally:
            self._give_back(claim)

    def _take(self, claim: Claim) -> None:
        entry = (claim.executions * claim.priority, next(self._arrivals), claim)
        with self._lock:
            heapq.heappush(self._waiting, entry)
            try:
                while self._waiting[0] is not entry or not self._fits(claim):
                    if claim.cancel.is_set():
                        raise Cancelled(f"{claim.where}: the model is being unloaded")
                    self._lock.wait()
            except BaseException:
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
                self._lock.notify_all()
                raise
            heapq.heappop(self._waiting)
            for key, count in claim.needs.items():
                self._in_use[key] = self._in_use.get(key, 0) + count
            self._lock.notify_all()

    def _give_back(self, claim: Claim) -> None:
        with self._lock:
            claim.executions += 1
            for key, count in claim.needs.items():
                self._in_use[key] -= count
            self._lock.notify_all()

    def _fits(self, claim: Claim) -> bool:
        return all(
            self._in_use.get(key, 0) + count <= self._limits.get(key, 0)
            for key, count in claim.needs.items()
        )

    def _limits_for(self, claims: list[Claim]) -> dict[tuple[object, str], int]:
        most: dict[tuple[object, str], int] = {}
        for claim in claims:
            for key, count in claim.needs.items():
                most[key] = max(most.get(key, 0), count)
        global_names = {name for device, name in most if device == GLOBAL}
        for device, name in most:
            if device != GLOBAL and name in global_names:
                raise InvalidArgument(
                    f'Resource "{name}" is present as both global and device-specific '
                    "resource in the model configuration."
                )
        if not self._given:
            return most
        limits = {}
        for (device, name), needed in most.items():
            available = max(
                (
                    given.count
                    for given in self._given
                    if given.name == name
                    and (device == GLOBAL or given.device is None or given.device == device)
                ),
                default=0,
            )
            if available < needed:
                raise InvalidArgument(
                    f'Resource count for "{name}" is limited to {available} which will '
                    "prevent scheduling of one or more model instances, the minimum "
                    f"required count is {needed}"
                )
            limits[(device, name)] = available
        return limits
