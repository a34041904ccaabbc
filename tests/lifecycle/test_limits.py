"""Load limits: instances counted without listing them, and the ledger that
holds every loaded version to max_instances_total."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from edgebox.errors import Unavailable
from edgebox.lifecycle.limits import InstanceLedger, instance_count
from edgebox.repository.config import ModelConfig
from edgebox.scheduling.instance_pool import instance_specs

GROUPS = [
    "",
    "instance_group [ { kind: KIND_CPU count: 3 } ]",
    "instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0, 1, 2 ] } ]",
    "instance_group [ { kind: KIND_GPU count: 2 } ]",
    "instance_group [ { kind: KIND_AUTO count: 2 } ]",
    "instance_group [ { kind: KIND_MODEL count: 0 } ]",
    "instance_group [ { kind: KIND_CPU count: 2 }, { kind: KIND_GPU gpus: [ 1 ] } ]",
]


@pytest.mark.parametrize("gpu_ids", [[], [0], [0, 1]])
@pytest.mark.parametrize("groups", GROUPS)
def test_instance_count_matches_the_instances_created(groups: str, gpu_ids: list[int]):
    config = text_format.Parse(groups, ModelConfig())
    assert instance_count(config, gpu_ids) == len(instance_specs(config, gpu_ids))


def test_a_huge_count_is_counted_not_listed():
    config = text_format.Parse("instance_group [ { kind: KIND_CPU count: 1000000000 } ]", ModelConfig())
    assert instance_count(config, []) == 10**9


def test_ledger_refuses_over_the_total_and_frees_on_release():
    ledger = InstanceLedger(4)
    first = ledger.reserve("model 'a' version 1", 3)
    with pytest.raises(Unavailable) as info:
        ledger.reserve("model 'b' version 1", 2)
    assert str(info.value) == (
        "model 'b' version 1: instance_group asks for 2 instances, but 3 of the 4 allowed in all "
        "are in use (setting 'max_instances_total')"
    )
    replacement = ledger.reserve("model 'a' version 2", 3, replacing=[first])
    assert ledger.in_use == 6
    ledger.release(first)
    ledger.release(None)
    assert ledger.in_use == 3
    ledger.release(replacement)
    ledger.reserve("model 'b' version 1", 4)
