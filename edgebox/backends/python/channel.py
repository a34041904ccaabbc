"""The control channel between the daemon and one isolated python model
process: messages over an ``AF_UNIX`` socket pair, each a JSON header, an
optional binary payload, and optionally file descriptors (shared-memory
regions, passed with ``SCM_RIGHTS``).

JSON rather than pickle on purpose: the child runs the user's code, and the
daemon must never unpickle what such a process sends. Tensors do not travel
here but through shared memory (``tensor_region``); only BLS calls, which are
rare and small, carry theirs in the payload.

One thread at a time uses each end; a peer that exits or closes its end makes
``recv`` and ``send`` raise ``ChannelClosed``.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
from collections.abc import Sequence
from typing import Any

_PREFIX = struct.Struct("<II")
"""Header bytes, payload bytes."""
MAX_FDS = 4
MAX_HEADER_BYTES = 64 * 1024 * 1024
_READ_BYTES = 64 * 1024
"""First read of a message: control messages fit, so most take one call."""
_JOIN_BYTES = 64 * 1024
"""Payloads up to this size go out in the header's system call."""


class ChannelClosed(Exception):
    """The other process closed its end, most likely because it exited."""


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @classmethod
    def pair(cls) -> tuple[Channel, socket.socket]:
        """This end as a Channel, and the socket to hand to the child."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        return cls(ours), theirs

    def send(self, header: dict, payload: Any = b"", fds: Sequence[int] = ()) -> None:
        data = json.dumps(header, separators=(",", ":")).encode()
        size = memoryview(payload).nbytes if payload else 0
        head = _PREFIX.pack(len(data), size) + data
        if size and size <= _JOIN_BYTES:
            head, size = head + bytes(payload), 0
        try:
            if fds:
                # The descriptors ride on the message's first byte.
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                sent = self._sock.sendmsg([head], rights)
                self._sock.sendall(memoryview(head)[sent:])
            else:
                self._sock.sendall(head)
            if size:
                self._sock.sendall(payload)
        except OSError as exc:
            raise ChannelClosed(f"send failed: {exc}") from None

    def recv(self) -> tuple[dict, bytearray, list[int]]:
        """The next message: (header, payload, received descriptors, which the
        caller owns and must close). One system call for a small message."""
        fds: list[int] = []
        try:
            first, ancillary, _flags, _address = self._sock.recvmsg(
                _READ_BYTES, socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
            )
        except OSError as exc:
            raise ChannelClosed(f"receive failed: {exc}") from None
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received = array.array("i")
                received.frombytes(data[: len(data) - len(data) % received.itemsize])
                fds.extend(received)
        if not first:
            _close_all(fds)
            raise ChannelClosed("the other end closed the channel")
        try:
            buffered = self._complete(bytearray(first), _PREFIX.size)
            header_size, payload_size = _PREFIX.unpack_from(buffered)
            if header_size > MAX_HEADER_BYTES:
                raise ChannelClosed(f"message header of {header_size} bytes")
            total = _PREFIX.size + header_size + payload_size
            if len(buffered) > total:
                # Messages alternate, so a peer never sends ahead; one that
                # does is not speaking this protocol.
                raise ChannelClosed("the other end sent past the end of a message")
            buffered = self._complete(buffered, total)
            header = json.loads(buffered[_PREFIX.size : _PREFIX.size + header_size])
            del buffered[: _PREFIX.size + header_size]
        except BaseException:
            _close_all(fds)
            raise
        if not isinstance(header, dict):
            _close_all(fds)
            raise ChannelClosed("message header is not a JSON object")
        return header, buffered, fds

    def _complete(self, buffer: bytearray, size: int) -> bytearray:
        """``buffer`` read on until it holds ``size`` bytes."""
        if len(buffer) >= size:
            return buffer
        filled = len(buffer)
        buffer.extend(bytes(size - filled))
        view = memoryview(buffer)
        try:
            while filled < size:
                got = self._sock.recv_into(view[filled:])
                if not got:
                    raise ChannelClosed("the other end closed the channel mid-message")
                filled += got
        except OSError as exc:
            raise ChannelClosed(f"receive failed: {exc}") from None
        finally:
            view.release()
        return buffer

    def close(self) -> None:
        self._sock.close()


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
