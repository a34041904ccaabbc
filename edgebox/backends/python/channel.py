"""The control channel between the daemon and one isolated python model
process: messages over an ``AF_UNIX`` socket pair, each a JSON header, an
optional binary payload, and optionally file descriptors (shared-memory
regions, passed with ``SCM_RIGHTS``).

JSON rather than pickle on purpose: the child runs the user's code, and the
daemon must never unpickle what such a process sends. Tensors do not travel
here but through shared memory (``tensor_region``); only BLS calls carry
theirs in the payload, each message its own, so BLS calls in flight together
never share a buffer.

Any thread may send on an end, one thread at a time receives on it; a peer
that exits or closes its end makes ``recv`` and ``send`` raise
``ChannelClosed``.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

_PREFIX = struct.Struct("<III")
"""Header bytes, payload bytes, descriptors sent with the message."""
MAX_FDS = 4
MAX_HEADER_BYTES = 64 * 1024 * 1024
_READ_BYTES = 64 * 1024
"""First read of a message: control messages fit, so most take one call."""
_JOIN_BYTES = 64 * 1024
"""Payloads up to this size go out in the header's system call."""


class ChannelClosed(Exception):
    """The other process closed its end, most likely because it exited."""


class Channel:
    """Either end of the channel. Any thread may ``send``: each message goes
    out whole, never interleaved with another thread's. One thread at a time
    may ``recv`` (the reader); messages may arrive back to back (several BLS
    calls in flight), so bytes read past one message wait for the next call."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._send_lock = threading.Lock()
        self._buffered = bytearray()
        """Bytes received past the end of the last message returned."""
        self._fds: deque[int] = deque()
        """Descriptors received and not yet handed out, in the order sent."""

    @classmethod
    def pair(cls) -> tuple[Channel, socket.socket]:
        """This end as a Channel, and the socket to hand to the child."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        return cls(ours), theirs

    def send(self, header: dict, payload: Any = b"", fds: Sequence[int] = ()) -> None:
        if len(fds) > MAX_FDS:
            raise ValueError(f"{len(fds)} descriptors in one message, at most {MAX_FDS}")
        data = json.dumps(header, separators=(",", ":")).encode()
        size = memoryview(payload).nbytes if payload else 0
        head = _PREFIX.pack(len(data), size, len(fds)) + data
        if size and size <= _JOIN_BYTES:
            head, size = head + bytes(payload), 0
        try:
            with self._send_lock:
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
        caller owns and must close). The payload is the message's own buffer.
        One system call for a small message."""
        buffered, self._buffered = self._buffered, bytearray()
        try:
            while len(buffered) < _PREFIX.size:
                buffered += self._receive_some(not buffered)
            header_size, payload_size, fd_count = _PREFIX.unpack_from(buffered)
            if header_size > MAX_HEADER_BYTES or fd_count > MAX_FDS:
                raise ChannelClosed(
                    f"message of {header_size} header bytes and {fd_count} descriptors"
                )
            total = _PREFIX.size + header_size + payload_size
            # Reads past the prefix stop at the message's end: the next
            # message's first byte, which may carry descriptors, is only
            # ever read by ``_receive_some``.
            buffered = self._complete(buffered, total)
            if len(buffered) > total:
                self._buffered = buffered[total:]
                del buffered[total:]
            if len(self._fds) < fd_count:
                raise ChannelClosed(
                    f"a message with {fd_count} descriptors came with {len(self._fds)}"
                )
            fds = [self._fds.popleft() for _ in range(fd_count)]
        except BaseException:
            close_fds(self._fds)
            self._fds.clear()
            raise
        try:
            header = json.loads(buffered[_PREFIX.size : _PREFIX.size + header_size])
            del buffered[: _PREFIX.size + header_size]
        except BaseException:
            close_fds(fds)
            raise
        if not isinstance(header, dict):
            close_fds(fds)
            raise ChannelClosed("message header is not a JSON object")
        return header, buffered, fds

    def _receive_some(self, at_message_start: bool) -> bytes:
        """The next bytes, keeping the descriptors that came with them."""
        try:
            data, ancillary, _flags, _address = self._sock.recvmsg(
                _READ_BYTES, socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
            )
        except OSError as exc:
            raise ChannelClosed(f"receive failed: {exc}") from None
        for level, kind, rights in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received = array.array("i")
                received.frombytes(rights[: len(rights) - len(rights) % received.itemsize])
                self._fds.extend(received)
        if not data:
            if at_message_start:
                raise ChannelClosed("the other end closed the channel")
            raise ChannelClosed("the other end closed the channel mid-message")
        return data

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
        close_fds(self._fds)
        self._fds.clear()


def close_fds(fds: Iterable[int]) -> None:
    """Close descriptors a message brought that nobody will use; the
    receiver owns every descriptor ``recv`` hands out."""
    for fd in fds:
        os.close(fd)
