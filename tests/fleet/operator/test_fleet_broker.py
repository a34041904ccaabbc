"""The operator's broker connection outlives a broker restart: a desired
state published while the broker is down reaches it once it is back, and
the retained messages are read again on the new connection."""

from __future__ import annotations

import threading

import pytest

from edgebox.fleet.operator.broker import BrokerOptions, FleetBroker
from mosquitto_broker import Subscriber


@pytest.mark.private_broker
def test_a_publish_while_the_broker_restarts_is_delivered_once_it_is_back(mosquitto):
    done: list[BaseException | None] = []
    with FleetBroker(BrokerOptions(mosquitto.url), ["fleet-test/+/fleet"]) as broker:
        broker.connect("fleet-test/probe")
        mosquitto.stop()

        def publish() -> None:
            try:
                broker.publish_retained("fleet-test/fleet/g/desired", b"signed", 30)
                done.append(None)
            except BaseException as exc:
                done.append(exc)

        publisher = threading.Thread(target=publish)
        publisher.start()
        mosquitto.start()
        publisher.join(40)

        assert done == [None]
        with Subscriber(mosquitto, "fleet-test/fleet/g/desired") as watcher:
            found = watcher.wait_for(lambda messages: messages, what="the retained document")
        assert found[0].payload == b"signed" and found[0].retain
