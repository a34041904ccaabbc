"""What every telemetry source promises (``TelemetrySource``), and how one
says it cannot work here (``SourceUnavailable``). The sources (jtop_source,
sysfs_source, psutil_source) import this; choice.py picks one of them.
"""

from __future__ import annotations

from typing import Protocol

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.telemetry.sample import DeviceInfo, TelemetrySample

SOURCES = ("auto", "jtop", "sysfs", "psutil")
"""The values of ``telemetry.source``."""


class SourceUnavailable(EdgeboxError):
    """A source that cannot work at all on this machine, raised by its
    constructor; the message says why (shown in the log when ``auto`` skips it)."""

    code = ErrorCode.UNAVAILABLE


class TelemetrySource(Protocol):
    """What the sampler thread asks of a source. Only that thread calls
    ``read`` (sources keep state between reads, such as CPU counters), so a
    source need not be thread-safe. ``read`` never raises for a missing
    sensor: that field is None."""

    name: str

    def device_info(self) -> DeviceInfo: ...

    def read(self) -> TelemetrySample: ...

    def close(self) -> None: ...
