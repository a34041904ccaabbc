"""Waves reach devices in targeting-bucket order, cumulatively, and a wave
is judged done, halted or waiting from the devices' reports alone."""

from __future__ import annotations

import pytest

from edgebox.fleet.document import Targets
from edgebox.fleet.operator.fleet_view import DeviceView, ModelReport
from edgebox.fleet.operator.table import device_rows, render
from edgebox.fleet.operator.watch import WaveGoal, judge
from edgebox.fleet.operator.waves import Wave, parse_waves, wave_order, wave_targets
from edgebox.fleet.targeting import bucket

DEVICES = [f"orin-{n:02d}" for n in range(10)]


def test_waves_parse_counts_and_percentages():
    assert parse_waves("1, 10%,100%") == [Wave(count=1), Wave(percent=10.0), Wave(percent=100.0)]


@pytest.mark.parametrize("text", ["0", "-1", "0%", "101%", "ten", "5.5", "nan%", ""])
def test_a_wave_that_is_neither_a_count_nor_a_percentage_is_refused(text):
    with pytest.raises(ValueError, match=f"wave '{text.strip()}'"):
        parse_waves(text)


def test_waves_reach_devices_in_bucket_order_and_keep_them():
    ordered = wave_order("line-3", "add_sub", DEVICES)
    buckets = [bucket("line-3", "add_sub", device) for device in ordered]
    assert buckets == sorted(buckets)
    first = wave_targets(Wave(count=2), ordered)[1]
    second = wave_targets(Wave(percent=35), ordered)[1]
    assert len(first) == 2 and len(second) == 4
    assert second[:2] == first


def test_only_the_hundred_percent_wave_targets_all():
    ordered = wave_order("line-3", "add_sub", DEVICES)
    assert wave_targets(Wave(percent=100), ordered) == (Targets(all=True), tuple(ordered))
    assert wave_targets(Wave(count=50), ordered) == (
        Targets(devices=tuple(ordered)),
        tuple(ordered),
    )


def view(device, generation, state, served=(), refused=None):
    return DeviceView(
        device, "line-3", generation, 1.0,
        {"add_sub": ModelReport(state, 2, tuple(served), "why")}, refused,
    )  # fmt: skip


GOAL = WaveGoal("line-3", "add_sub", 2, 10, ("orin-a", "orin-b"))


def test_a_wave_is_done_when_every_device_serves_the_version_at_its_generation():
    assert judge(
        [view("orin-a", 10, "serving", [2]), view("orin-b", 11, "serving", [1, 2])], GOAL
    ).done
    waiting = judge([view("orin-a", 9, "serving", [2]), view("orin-b", 10, "serving", [1])], GOAL)
    assert not waiting.done and waiting.waiting_for == ("orin-a", "orin-b")


def test_a_rejection_of_an_older_generation_does_not_halt_the_wave():
    outcome = judge([view("orin-a", 9, "rejected"), view("orin-b", 10, "serving", [2])], GOAL)
    assert not outcome.halted_by and outcome.waiting_for == ("orin-a",)


@pytest.mark.parametrize("state", ["rejected", "failed"])
def test_a_failure_at_the_waves_generation_halts_it(state):
    outcome = judge([view("orin-a", 10, "serving", [2]), view("orin-b", 10, state)], GOAL)
    assert outcome.halted_by == "orin-b"


def test_a_refused_document_of_the_waves_generation_halts_it():
    refused = {"generation": 10, "reason": "signed with key 'x', which this device does not trust"}
    outcome = judge([view("orin-a", 9, "serving", [1], refused)], GOAL)
    assert outcome.halted_by == "orin-a"


def test_the_table_keeps_a_devices_text_on_one_line():
    row = view("orin-a\x1b[2J", 10, "failed")
    text = render(device_rows([DeviceView(**{**row.__dict__, "models": {
        "add_sub": ModelReport("failed", 2, (), "line one\nline two\x07")}})], ["add_sub"]))  # fmt: skip
    assert "\x1b" not in text and "\x07" not in text
    assert text.splitlines()[1].endswith("line one line two")
