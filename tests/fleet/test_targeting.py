"""Which devices a wave reaches: all, a list, or a stable percentage in
which a device, once in, stays in as the percentage grows."""

from __future__ import annotations

from edgebox.fleet.document import Targets
from edgebox.fleet.targeting import bucket, targets_device

DEVICES = [f"orin-{n:03d}" for n in range(400)]


def reached(targets: Targets) -> set[str]:
    return {d for d in DEVICES if targets_device(targets, "line-3", "lane_detector", d)}


def test_a_percentage_reaches_about_that_share_of_devices() -> None:
    assert 20 <= len(reached(Targets(percent=10))) <= 60
    assert reached(Targets(percent=0)) == set()
    assert reached(Targets(percent=100)) == set(DEVICES)


def test_a_device_in_a_smaller_percentage_stays_in_a_larger_one() -> None:
    assert reached(Targets(percent=10)) <= reached(Targets(percent=50))


def test_buckets_differ_between_models_so_one_device_is_not_always_first() -> None:
    first = [bucket("line-3", model, "orin-000") for model in ("a", "b", "c", "d", "e", "f")]
    assert len(set(first)) > 1


def test_a_list_and_a_percentage_reach_their_union() -> None:
    listed = Targets(devices=("orin-399",), percent=10)
    assert reached(listed) == reached(Targets(percent=10)) | {"orin-399"}
    assert reached(Targets(all=True)) == set(DEVICES)
