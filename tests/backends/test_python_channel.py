"""The channel to an isolated python model process carries messages back to
back (several BLS calls in flight at once): each comes out whole, in order,
with its own payload and exactly the descriptors sent with it."""

from __future__ import annotations

import os
import threading

import pytest

from edgebox.backends.python.channel import Channel, ChannelClosed


def test_messages_sent_back_to_back_come_out_whole_with_their_own_descriptors() -> None:
    ours, theirs = Channel.pair()
    peer = Channel(theirs)
    read_end, write_end = os.pipe()
    big = bytes(range(256)) * 1024  # past the size sent in the header's system call
    try:
        peer.send({"op": "infer", "id": 1}, b"first")
        peer.send({"op": "infer", "id": 2})
        peer.send({"op": "result"}, fds=[write_end])
        sender = threading.Thread(target=lambda: peer.send({"op": "infer", "id": 3}, big))
        sender.start()
        first, second, third, fourth = (ours.recv() for _ in range(4))
        sender.join()
        assert (first[0], bytes(first[1]), first[2]) == ({"op": "infer", "id": 1}, b"first", [])
        assert second == ({"op": "infer", "id": 2}, bytearray(), [])
        assert third[0] == {"op": "result"} and bytes(third[1]) == b""
        (received,) = third[2]
        os.write(received, b"x")
        os.close(received)
        assert os.read(read_end, 1) == b"x"
        assert fourth[0] == {"op": "infer", "id": 3} and bytes(fourth[1]) == big
        assert fourth[2] == []
        peer.close()
        with pytest.raises(ChannelClosed, match="the other end closed the channel"):
            ours.recv()
    finally:
        ours.close()
        theirs.close()
        os.close(read_end)
        os.close(write_end)


def test_sends_from_several_threads_never_interleave() -> None:
    ours, theirs = Channel.pair()
    peer = Channel(theirs)
    payload = b"y" * (300 * 1024)
    senders = [
        threading.Thread(
            target=lambda i=i: [peer.send({"id": i, "n": n}, payload) for n in range(5)]
        )
        for i in range(4)
    ]
    try:
        for sender in senders:
            sender.start()
        seen = [ours.recv() for _ in range(20)]
        for sender in senders:
            sender.join()
        assert all(bytes(message[1]) == payload for message in seen)
        for i in range(4):
            assert [h["n"] for h, _p, _f in seen if h["id"] == i] == list(range(5))
    finally:
        ours.close()
        theirs.close()


def test_a_peer_that_closes_mid_message_is_reported() -> None:
    ours, theirs = Channel.pair()
    try:
        theirs.sendall(b"\x10\x00\x00\x00")
        theirs.close()
        with pytest.raises(ChannelClosed, match="the other end closed the channel mid-message"):
            ours.recv()
    finally:
        ours.close()
