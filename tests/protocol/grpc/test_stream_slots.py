"""StreamSlots: streams are bounded in all and per client address, a refusal
says which bound and the flag that sets it, and a slot given back is free."""

from __future__ import annotations

from edgebox.protocol.grpc.stream_slots import StreamSlots


def test_one_client_is_held_to_its_own_bound_while_others_still_get_slots():
    slots = StreamSlots(total=4, per_client=2)
    assert slots.take("10.0.0.1") is None
    assert slots.take("10.0.0.1") is None
    refused = slots.take("10.0.0.1")
    assert refused is not None and "--grpc-max-streams-per-client" in refused
    assert slots.take("10.0.0.2") is None
    assert slots.open == 3


def test_the_total_bound_refuses_every_client_once_reached():
    slots = StreamSlots(total=2, per_client=2)
    assert slots.take("10.0.0.1") is None
    assert slots.take("10.0.0.2") is None
    refused = slots.take("10.0.0.3")
    assert refused is not None and "--grpc-max-streams)" in refused


def test_a_slot_given_back_can_be_taken_again():
    slots = StreamSlots(total=1, per_client=1)
    assert slots.take("10.0.0.1") is None
    assert slots.take("10.0.0.2") is not None
    slots.give("10.0.0.1")
    assert slots.open == 0
    assert slots.take("10.0.0.2") is None


def test_the_per_client_bound_is_never_above_the_total():
    assert StreamSlots(total=3, per_client=10).per_client == 3
