"""Rules for what the schedulers read beside batching itself: the dynamic
batcher's priority levels and each instance group's rate limiter, worded as
Triton 2.51 words them where it checks the same thing. A default level or a
queue policy outside ``1..priority_levels`` would leave requests in a queue
nothing reads; a nameless resource could not be given on the command line."""

from __future__ import annotations

from collections.abc import Iterator

from edgebox.repository.config_locator import Problem


def check_scheduling(config) -> Iterator[Problem]:
    if config.HasField("dynamic_batching"):
        yield from _priority_problems(config.name, config.dynamic_batching)
    for index, group in enumerate(config.instance_group):
        for number, resource in enumerate(group.rate_limiter.resources):
            if not resource.name.strip():
                yield (
                    f"instance_group[{index}].rate_limiter.resources[{number}]",
                    "rate_limiter resource needs a name",
                )


def _priority_problems(name: str, batching) -> Iterator[Problem]:
    levels = batching.priority_levels
    if levels == 0:
        return
    if not 1 <= batching.default_priority_level <= levels:
        yield (
            "dynamic_batching.default_priority_level",
            f"default priority level must be in range [1, {levels}] for {name}",
        )
    for level in sorted(batching.priority_queue_policy):
        if not 1 <= level <= levels:
            yield (
                "dynamic_batching.priority_queue_policy",
                f"priority queue policy must have priority level in range [1, {levels}] for {name}",
            )
