"""The default device id: the hostname made unique per machine, so a fleet
flashed from one image does not share one id (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.mqtt.identity import device_id_from, hostname_topic_level, machine_suffix
from edgebox.mqtt.settings import MqttSettings


def machine(root: Path, **files: str) -> Path:
    """A fake root (the host's is never read) holding ``files``, keyed by
    their path with ``/`` as ``__`` and ``-`` as ``_``."""
    for name, text in files.items():
        path = root.joinpath(*(part.replace("_", "-") for part in name.split("__")))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_two_clones_with_one_hostname_get_different_ids(tmp_path: Path) -> None:
    first = machine(tmp_path / "a", etc__machine_id="0b8f4c2e9a7d4e1f8c3b6a5d4e3f2a10\n")
    second = machine(tmp_path / "b", etc__machine_id="7d1e2f3a4b5c6d7e8f9a0b1c2d3e4f50\n")
    ids = {device_id_from("ubuntu", machine_suffix(root)) for root in (first, second)}
    assert len(ids) == 2
    for found in ids:
        assert found.startswith("ubuntu-") and len(found) == len("ubuntu-") + 8
        assert list(MqttSettings(device_id=found).problems()) == []


def test_the_jetson_serial_number_wins_over_a_cloned_machine_id(tmp_path: Path) -> None:
    clone = "0b8f4c2e9a7d4e1f8c3b6a5d4e3f2a10\n"
    first = machine(
        tmp_path / "a", etc__machine_id=clone, proc__device_tree__serial_number="1421021044512\0"
    )
    second = machine(
        tmp_path / "b", etc__machine_id=clone, proc__device_tree__serial_number="1421021044777\0"
    )
    assert machine_suffix(first) != machine_suffix(second)
    assert machine_suffix(first) == machine_suffix(
        machine(tmp_path / "c", sys__firmware__devicetree__base__serial_number="1421021044512")
    )


def test_the_suffix_does_not_show_the_machine_id(tmp_path: Path) -> None:
    machine_id = "0b8f4c2e9a7d4e1f8c3b6a5d4e3f2a10"
    suffix = machine_suffix(machine(tmp_path, etc__machine_id=machine_id))
    assert suffix is not None and suffix not in machine_id


def test_without_a_serial_or_machine_id_the_hostname_alone_is_the_id(tmp_path: Path) -> None:
    empty = machine(tmp_path, etc__machine_id="\n")
    assert machine_suffix(empty) is None
    assert device_id_from("orin-07.lab", None) == "orin-07.lab"


@pytest.mark.parametrize(
    ("hostname", "level"),
    [("orin-07", "orin-07"), ("my host/#1+", "my-host--1"), ("---", "edgebox"), ("", "edgebox")],
)
def test_hostname_is_sanitised_to_one_topic_level(hostname: str, level: str) -> None:
    assert hostname_topic_level(hostname) == level


def test_a_long_hostname_is_cut_to_leave_room_for_the_suffix() -> None:
    found = device_id_from("a" * 80, "3f2a9c1b")
    assert found == "a" * 55 + "-3f2a9c1b"
    assert list(MqttSettings(device_id=found).problems()) == []
    assert device_id_from("---", "3f2a9c1b") == "edgebox-3f2a9c1b"
