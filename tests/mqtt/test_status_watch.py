"""What a message on the device's own status topic means: our echo, a
retained status that is not ours any more, or another daemon using our id."""

from __future__ import annotations

import json

from edgebox.mqtt.status_watch import CONFLICT_WINDOW_S, MAX_DOCUMENT_BYTES, StatusWatch

STARTED = 1718000000.25


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def status(state: str, started_at: float = STARTED, seq: int = 1, **more) -> bytes:
    document = {"state": state, "started_at": started_at, "seq": seq, **more}
    return json.dumps(document).encode()


def confirmed_watch(clock: FakeClock | None = None) -> StatusWatch:
    watch = StatusWatch("dev1", STARTED, clock or FakeClock())
    watch.connection_opened()
    ours = status("online")
    watch.published(ours)
    assert watch.seen(ours).republish is False
    return watch


def test_an_offline_not_ours_after_our_status_is_answered_by_publishing_ours_again():
    watch = confirmed_watch()
    check = watch.seen(status("offline", started_at=1.0, reason="shutdown"))
    assert (check.republish, check.conflict) == (True, None)
    # Once: the next one waits until our new status is echoed.
    assert watch.seen(json.dumps({"state": "offline"}).encode()).republish is False


def test_our_own_last_will_sent_late_by_the_broker_is_answered_too():
    watch = confirmed_watch()
    will = status("offline", seq=7, reason="connection lost")
    assert watch.seen(will).republish is True


def test_what_the_broker_retained_before_our_status_is_not_answered():
    watch = StatusWatch("dev1", STARTED, FakeClock())
    watch.connection_opened()
    watch.published(status("online"))
    assert watch.seen(status("offline", started_at=1.0)).republish is False
    assert watch.seen(b"not json at all").republish is False


def test_another_daemons_online_while_ours_stands_is_a_conflict_answered_once():
    """Once, so that the other daemon sees ours and reports the conflict too;
    never again within the window, so two daemons never take turns."""
    watch = confirmed_watch()
    check = watch.seen(status("online", started_at=2.0))
    assert check.conflict is not None and check.republish is True
    ours = status("online", seq=2)
    watch.published(ours)
    watch.seen(ours)
    again = watch.seen(status("online", started_at=2.0, seq=2))
    assert (again.republish, again.conflict) == (False, None)


def test_an_older_status_of_ours_arriving_late_is_ours():
    watch = StatusWatch("dev1", STARTED, FakeClock())
    first, second = status("online", seq=1), status("online", seq=2)
    watch.published(first)
    watch.published(second)
    assert watch.seen(first).republish is False
    assert watch.seen(second).republish is False
    assert watch.seen(status("offline", started_at=3.0)).republish is True


def test_two_sightings_of_another_daemon_are_a_conflict_reported_once_a_window():
    clock = FakeClock()
    watch = StatusWatch("dev1", STARTED, clock)
    assert watch.seen(status("offline", started_at=5.0, reason="connection lost")).conflict is None
    clock.now += 30
    conflict = watch.seen(status("offline", started_at=5.0, seq=2, reason="connection lost"))
    assert conflict.conflict is not None
    assert conflict.conflict.startswith(
        "another daemon publishes as device 'dev1' (a status offline, reason 'connection lost', "
        f"started_at 5.0, not ours {STARTED}): two devices share this device id"
    )
    clock.now += 30
    assert watch.seen(status("online", started_at=5.0, seq=3)).conflict is None
    clock.now += CONFLICT_WINDOW_S
    assert watch.seen(status("online", started_at=5.0, seq=4)).conflict is not None


def test_what_a_previous_run_left_is_no_conflict():
    clock = FakeClock()
    watch = StatusWatch("dev1", STARTED, clock)
    assert (
        watch.seen(status("offline", started_at=STARTED - 60, reason="shutdown")).conflict is None
    )
    clock.now += CONFLICT_WINDOW_S + 1
    assert watch.seen(status("offline", started_at=STARTED - 60)).conflict is None


def test_a_payload_that_is_no_status_document_is_replaced_but_is_no_conflict():
    watch = confirmed_watch()
    check = watch.seen(b"\xff garbage")
    assert (check.republish, check.conflict) == (True, None)


def test_a_flood_on_the_status_topic_keeps_memory_and_work_bounded():
    """Any client the broker lets publish there is untrusted: a flood of
    statuses keeps two timestamps, and a huge payload is not parsed."""
    clock = FakeClock()
    watch = confirmed_watch(clock)
    for seq in range(10_000):
        watch.seen(status("offline", started_at=9.0, seq=seq))
    assert len(watch._others) == 2
    huge = status("online", started_at=9.0, padding="x" * MAX_DOCUMENT_BYTES)
    fresh = confirmed_watch(clock)
    check = fresh.seen(huge)
    assert (check.republish, check.conflict) == (True, None)
