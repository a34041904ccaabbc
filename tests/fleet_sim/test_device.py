"""One simulated device on its own: its ``fleet:`` section reaches the
daemon's settings (the file it writes is the one read: a bad group there
stops the daemon naming that file), which accept a good one."""

from __future__ import annotations

import json

import pytest

from edgebox.fleet.signing import generate_key
from fleet_sim.device import Device, FleetSection


def test_device_runs_with_its_fleet_section(tmp_path, mosquitto, device_id):
    public = generate_key(tmp_path / "operator.key")
    section = FleetSection("line-3", (public,), {"artifact_max_mb": 8})
    device = Device(device_id, tmp_path / device_id, mosquitto.url, fleet=section)
    device.start()
    try:
        assert json.loads(device.config_path.read_text()) == {
            "fleet": {
                "group": "line-3",
                "trusted_keys": [str(public)],
                "download_dir": str(tmp_path / device_id / "downloads"),
                "artifact_max_mb": 8,
            }
        }
        assert device.running
    finally:
        code = device.stop()
    assert code == 0, device.log()


def test_device_without_fleet_section_has_an_empty_settings_file(tmp_path, mosquitto, device_id):
    device = Device(device_id, tmp_path / device_id, mosquitto.url)
    assert device.flags()[:2] == ["--config", str(device.config_path)]
    assert json.loads(device.config_path.read_text()) == {}


def test_device_settings_file_is_the_one_the_daemon_reads(tmp_path, mosquitto, device_id):
    public = generate_key(tmp_path / "operator.key")
    device = Device(
        device_id, tmp_path / device_id, mosquitto.url, fleet=FleetSection("a/b", (public,))
    )
    with pytest.raises(AssertionError, match="daemon exited with 78") as refused:
        device.start()
    assert f"edgebox: {device.config_path}:3: setting 'fleet.group'" in str(refused.value)
