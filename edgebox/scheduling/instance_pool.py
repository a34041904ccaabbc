"""Model instances, as ``instance_group`` asks for them, handed out one caller
at a time.

``count`` instances per group (per listed GPU for ``KIND_GPU``) execute in
parallel; a caller that finds them all busy waits for the next free one, in
arrival order. The pool never creates or destroys instances on its own: the
lifecycle manager loads them all before the version takes traffic and closes
them after it drained.

Under the rate limiter (``scheduling/rate_limiter.py``) an instance also waits
for its resources before each execute: schedulers run every execute inside
``running(instance)``, which costs nothing when rate limiting is off.
"""

from __future__ import annotations

import contextlib
import logging
import queue

from tritonclient.grpc import model_config_pb2

from edgebox.backends.base import Instance, InstanceSpec
from edgebox.scheduling.rate_limiter import Claim, RateLimiter, claim_for

log = logging.getLogger(__name__)

_Group = model_config_pb2.ModelInstanceGroup


def instance_specs(config, gpu_ids: list[int]) -> list[InstanceSpec]:
    """The instances a config asks for. ``KIND_AUTO`` means GPU where one exists,
    as in Triton; ``gpus`` empty means every GPU."""
    specs: list[InstanceSpec] = []
    for group in config.instance_group:
        kind = group.kind
        if kind == _Group.KIND_AUTO:
            kind = _Group.KIND_GPU if gpu_ids else _Group.KIND_CPU
        secondary = tuple(
            (_Group.SecondaryDevice.SecondaryDeviceKind.Name(d.kind), d.device_id)
            for d in group.secondary_devices
        )
        devices = (list(group.gpus) or gpu_ids or [0]) if kind == _Group.KIND_GPU else [0]
        kind_name = _Group.Kind.Name(kind).removeprefix("KIND_")
        limiter = group.rate_limiter
        resources = tuple((r.name, r.count, getattr(r, "global")) for r in limiter.resources)
        index = 0
        for device_id in devices:
            for _ in range(max(group.count, 1)):
                specs.append(
                    InstanceSpec(
                        f"{group.name}_{index}",
                        kind_name,
                        device_id,
                        secondary,
                        resources,
                        limiter.priority,
                    )
                )
                index += 1
    return specs


_NOT_LIMITED = contextlib.nullcontext()


class InstancePool:
    """Owns a version's instances. ``acquire``/``release`` may be called from any
    thread; ``close`` only after every caller released."""

    def __init__(
        self,
        instances: list[Instance],
        limiter: RateLimiter | None = None,
        specs: list[InstanceSpec] | None = None,
        where: str = "",
    ) -> None:
        """With a ``limiter``, ``specs`` (one per instance) say what each
        needs; registering them raises InvalidArgument when they could never
        run, and the caller then still owns the instances."""
        self._instances = list(instances)
        self._free: queue.SimpleQueue[Instance] = queue.SimpleQueue()
        for instance in self._instances:
            self._free.put(instance)
        self._limiter = limiter
        self._claims: dict[int, Claim] = {}
        if limiter is not None and specs is not None:
            claims = {
                id(instance): claim_for(
                    f"{where}, instance '{spec.name}'",
                    spec.device_id,
                    spec.resources,
                    spec.priority,
                )
                for instance, spec in zip(self._instances, specs, strict=True)
            }
            limiter.register(list(claims.values()))
            self._claims = claims

    def __len__(self) -> int:
        return len(self._instances)

    def acquire(self) -> Instance:
        return self._free.get()

    def release(self, instance: Instance) -> None:
        self._free.put(instance)

    def running(self, instance: Instance) -> contextlib.AbstractContextManager[None]:
        """Around each execute: waits for the instance's turn and resources
        under the rate limiter (Cancelled when the version closes first)."""
        if self._limiter is None or not self._claims:
            return _NOT_LIMITED
        return self._limiter.running(self._claims[id(instance)])

    def close(self) -> None:
        if self._limiter is not None and self._claims:
            self._limiter.unregister(list(self._claims.values()))
            self._claims = {}
        for instance in self._instances:
            try:
                instance.close()
            except Exception:
                log.exception("closing instance %r failed", instance)
        self._instances.clear()
