"""The ``fleet`` fixture: one simulated fleet per test module, of
``EDGEBOX_FLEET_DEVICES`` devices (3 by default, 20 in ``make test-fleet``).
A module whose devices need a ``fleet:`` section (an agent) overrides the
``fleet_section`` fixture with a function of the device id, e.g. with the
module's ``fleet_key``:

    @pytest.fixture(scope="module")
    def fleet_section(fleet_key):
        return lambda device_id: FleetSection("line-3", (fleet_key.public,))
"""

from __future__ import annotations

import os

import pytest

from edgebox.fleet.signing import generate_key
from fleet_sim.fleet import Fleet
from fleet_sim.keys import OperatorKey
from mosquitto_broker import mosquitto_installed

DEFAULT_SIZE = 3


def fleet_size() -> int:
    raw = os.environ.get("EDGEBOX_FLEET_DEVICES", str(DEFAULT_SIZE))
    try:
        size = int(raw)
    except ValueError:
        raise pytest.UsageError(
            f"EDGEBOX_FLEET_DEVICES: expected a number of devices, got {raw!r}"
        ) from None
    if not 3 <= size <= 100:
        raise pytest.UsageError(f"EDGEBOX_FLEET_DEVICES: expected 3..100 devices, got {size}")
    return size


@pytest.fixture(scope="module")
def fleet_key(tmp_path_factory) -> OperatorKey:
    """An operator's Ed25519 key pair, as ``edgebox fleet keygen`` writes it."""
    private = tmp_path_factory.mktemp("operator") / "fleet.key"
    return OperatorKey(private=private, public=generate_key(private))


@pytest.fixture(scope="module")
def fleet_section():
    """No ``fleet:`` section: the devices run without an agent."""
    return lambda device_id: None


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, fleet_section) -> Fleet:
    if not mosquitto_installed():
        pytest.fail(
            "mosquitto is not installed (looked on PATH and in /usr/sbin): run `make test`, "
            "which installs Debian's 'mosquitto' and 'mosquitto-clients' packages"
        )
    with Fleet(
        tmp_path_factory.mktemp("fleet"), fleet_size(), fleet_section=fleet_section
    ) as started:
        yield started


@pytest.fixture
def prometheus(fleet):
    """The fleet's Prometheus; the test is skipped where it is not installed."""
    if fleet.prometheus is None:
        pytest.skip(
            "prometheus is not installed (no 'prometheus' on PATH): run `make test` or "
            "`make test-fleet`, which install Debian's 'prometheus' package"
        )
    return fleet.prometheus
