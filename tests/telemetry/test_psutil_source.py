"""The psutil source: CPU, memory and thermal sensors anywhere; never a GPU."""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

from edgebox.telemetry.psutil_source import PsutilSource

Reading = namedtuple("Reading", "label current high critical")


class FakePsutilWithoutSensors:
    """The psutil calls the source makes, as on macOS (no sensors_temperatures)."""

    def cpu_percent(self, interval=None, percpu=False):
        return [12.0, 30.0] if percpu else 21.0

    def cpu_count(self, logical=True):
        return 2

    def virtual_memory(self):
        return SimpleNamespace(total=8_000_000_000, available=6_000_000_000)


class FakePsutil(FakePsutilWithoutSensors):
    def __init__(self, sensors) -> None:
        self.sensors = sensors

    def sensors_temperatures(self):
        return self.sensors


def test_real_psutil_reads_cpu_and_memory_and_says_no_gpu():
    source = PsutilSource()
    sample = source.read()
    assert sample.source == "psutil"
    assert sample.gpu is None
    assert 0 <= sample.cpu_pct <= 100
    assert 0 < sample.memory_used_bytes < sample.memory_total_bytes
    info = source.device_info()
    assert (info.has_gpu, info.dla_cores) == (False, 0)
    assert info.cpu_cores >= 1 and info.memory_total_bytes == sample.memory_total_bytes


def test_sensors_are_named_by_chip_and_label():
    sensors = {
        "coretemp": [
            Reading("Package id 0", 52.0, 100.0, 100.0),
            Reading("Core 0", 50.0, 100.0, 100.0),
        ],
        "acpitz": [Reading("", 27.8, None, None)],
    }
    sample = PsutilSource(FakePsutil(sensors)).read()
    assert sample.temperatures_c == {
        "acpitz": 27.8,
        "coretemp/Package id 0": 52.0,
        "coretemp/Core 0": 50.0,
    }
    assert (sample.cpu_pct, sample.cpu_per_core_pct) == (21.0, (12.0, 30.0))
    assert sample.memory_used_bytes == 2_000_000_000


def test_a_machine_without_sensors_has_no_temperatures():
    assert PsutilSource(FakePsutilWithoutSensors()).read().temperatures_c == {}
