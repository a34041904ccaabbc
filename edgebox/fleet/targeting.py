"""Which devices a model's desired version is for: all of them, a list, or a
stable percentage.

The percentage must be stable: a device in the first 10% stays in when the
operator widens the wave to 50%, and a device's membership depends only on
the group, the model and its own id (no coordinator, no shared counter). So
each device hashes ``group/model/device`` into one of 100 buckets and is in
when its bucket is below the percentage; the same rule lets the operator's
tool tell in advance which devices a wave reaches.
"""

from __future__ import annotations

import hashlib

from edgebox.fleet.document import Targets


def bucket(group: str, model: str, device: str) -> int:
    digest = hashlib.sha256(f"{group}/{model}/{device}".encode()).hexdigest()
    return int(digest[:8], 16) % 100


def targets_device(targets: Targets, group: str, model: str, device: str) -> bool:
    if targets.all or device in targets.devices:
        return True
    return targets.percent > 0 and bucket(group, model, device) < targets.percent
