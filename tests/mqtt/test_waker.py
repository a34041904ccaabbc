"""The MQTT thread's wake-up: a publisher pays a write only when the thread
sleeps idle, once per sleep, and never after the waker is closed."""

from __future__ import annotations

import select

from edgebox.mqtt.waker import Waker


def readable(waker: Waker) -> bool:
    return bool(select.select([waker], [], [], 0)[0])


def test_a_wake_while_the_thread_is_not_asleep_writes_nothing():
    waker = Waker()
    try:
        waker.wake()
        assert not readable(waker)
    finally:
        waker.close()


def test_an_armed_waker_is_woken_once_per_sleep():
    waker = Waker()
    try:
        waker.arm()
        waker.wake()
        waker.wake()
        assert readable(waker)
        waker.drain()
        assert not readable(waker), "the second wake found it disarmed and wrote nothing"
        waker.arm()
        waker.wake()
        assert readable(waker)
    finally:
        waker.close()


def test_a_closed_waker_ignores_wakes():
    waker = Waker()
    waker.close()
    waker.arm()
    waker.wake()
    waker.close()
