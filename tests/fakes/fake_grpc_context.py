"""FakeGrpcContext: the parts of ``grpc.ServicerContext`` a servicer reads
(peer, invocation metadata) and ``abort``, which raises FakeAbort carrying the
status, as the real one ends the call by raising."""

from __future__ import annotations

import grpc


class FakeAbort(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details


class FakeGrpcContext:
    def __init__(self, peer: str = "ipv4:127.0.0.1:40000", metadata=()) -> None:
        self._peer = peer
        self._metadata = tuple(metadata)

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self):
        return self._metadata

    def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise FakeAbort(code, details)
