"""How much work one load may ask for: warm-up requests, instances per model
and in all. A config over a limit is refused with the config field, the limit
and the setting that sets it; nothing is ever silently clamped, so what serves
is what the config says.

Instances are counted from the moment a load starts creating them until the
version holding them is closed. A reload does not count the versions it
replaces (the same version number, or those its version policy drops): load
before swap needs both for a moment, and counting the old one would make a
model that uses more than half of ``max_instances_total`` impossible to update.
Every other load still counts them until they are closed, so the overshoot is
bounded by that one model's own instances.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Collection
from dataclasses import dataclass, field

from tritonclient.grpc import model_config_pb2

from edgebox.errors import Unavailable

DEFAULT_MAX_WARMUP_REQUESTS = 1000
DEFAULT_MAX_INSTANCES_PER_MODEL = 16
DEFAULT_MAX_INSTANCES_TOTAL = 64

_Group = model_config_pb2.ModelInstanceGroup


def default_max_threads_per_instance() -> int:
    """The machine's CPU cores: more threads per instance than cores only adds
    context switches."""
    return os.cpu_count() or 1


@dataclass(frozen=True)
class LoadLimits:
    """The daemon's limits (settings of the same names)."""

    max_warmup_requests: int = DEFAULT_MAX_WARMUP_REQUESTS
    max_instances_per_model: int = DEFAULT_MAX_INSTANCES_PER_MODEL
    max_instances_total: int = DEFAULT_MAX_INSTANCES_TOTAL
    max_threads_per_instance: int = field(default_factory=default_max_threads_per_instance)


def warmup_request_count(config) -> int:
    """Requests ``model_warmup`` runs per version (a ``count`` of 0 runs once)."""
    return sum(max(warmup.count, 1) for warmup in config.model_warmup)


def instance_count(config, gpu_ids: list[int]) -> int:
    """Instances ``instance_group`` creates per version, computed without
    listing them (a count of 10**9 must be refused, not enumerated); the same
    arithmetic as ``instance_specs``, which a test holds it to."""
    total = 0
    for group in config.instance_group:
        kind = group.kind
        if kind == _Group.KIND_AUTO:
            kind = _Group.KIND_GPU if gpu_ids else _Group.KIND_CPU
        devices = (len(group.gpus) or len(gpu_ids) or 1) if kind == _Group.KIND_GPU else 1
        total += max(group.count, 1) * devices
    return total


def config_problem(name: str, config, limits: LoadLimits, gpu_ids: list[int]) -> str | None:
    """Why ``config`` asks for more than one model may, or None. Ensembles have
    no instances of their own."""
    warmups = warmup_request_count(config)
    if warmups > limits.max_warmup_requests:
        return (
            f"model '{name}': model_warmup asks for {warmups} requests in all (the sum of every "
            f"entry's count), more than the {limits.max_warmup_requests} allowed "
            "(setting 'max_warmup_requests')"
        )
    if config.platform == "ensemble":
        return None
    instances = instance_count(config, gpu_ids)
    if instances > limits.max_instances_per_model:
        return (
            f"model '{name}': instance_group asks for {instances} instances, more than the "
            f"{limits.max_instances_per_model} allowed per model "
            "(setting 'max_instances_per_model')"
        )
    return None


class InstanceLedger:
    """Instances alive or being created, held to ``max_instances_total``.
    Thread-safe: loads of different models reserve concurrently, and retire
    threads release what a closed version held."""

    def __init__(self, max_total: int) -> None:
        self._max_total = max_total
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}
        self._tickets = itertools.count(1)

    def reserve(self, where: str, count: int, replacing: Collection[int] = ()) -> int:
        """A ticket holding ``count`` instances until ``release``; Unavailable
        when they would take the total over the limit. ``replacing``: tickets
        of the versions this load replaces, not counted against it."""
        with self._lock:
            used = sum(n for ticket, n in self._held.items() if ticket not in replacing)
            if used + count > self._max_total:
                raise Unavailable(
                    f"{where}: instance_group asks for {count} instances, but {used} of the "
                    f"{self._max_total} allowed in all are in use (setting 'max_instances_total')"
                )
            ticket = next(self._tickets)
            self._held[ticket] = count
            return ticket

    def release(self, ticket: int | None) -> None:
        with self._lock:
            self._held.pop(ticket, None)

    @property
    def in_use(self) -> int:
        with self._lock:
            return sum(self._held.values())
