"""What a handler sees and returns: an ``HttpRequest`` in, an ``HttpResponse``
out, and the bytes that put a response on the wire (its head, and the
scatter-gather bookkeeping for ``sendmsg``).

Threads and ownership. A request and its response belong to the worker thread
that runs the handler; nothing here locks. The one exception is
``HttpRequest.client_gone``, which any thread may call while the handler runs.
Response bodies are lists of buffers sent in order and never joined, so a
tensor's array goes out from its own memory: ``nbytes`` and ``drop_sent``
treat bytes, bytearrays, memoryviews and C-contiguous numpy arrays alike. A
streamed body (``HttpResponse.stream``) is the one exception: chunks of bytes
written as they come.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus

import numpy as np

IOV_MAX = 1024
"""Most buffers one ``sendmsg`` takes (Linux's ``UIO_MAXIOV``)."""


def _never() -> bool:
    return False


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    """Percent-decoded path, without the query string."""
    query: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: memoryview
    """Writable; exactly the body's bytes."""
    peer: str = ""
    """The client's IP address as the socket saw it ("" when unknown): what
    access control decides loopback by."""
    client_gone: Callable[[], bool] = _never
    """True once the client has closed (or half-closed) its connection, so
    nobody will read the answer. Cheap (one non-blocking ``poll``) and callable
    from any thread while the handler runs: what lets a queued inference be
    skipped. Pipelined bytes still unread do not make it true; a close does."""


@dataclass(slots=True)
class HttpResponse:
    status: int
    body: list = field(default_factory=list)
    """Buffers sent in order without being joined: bytes or C-contiguous arrays."""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)
    stream: Iterator[bytes] | None = None
    """A body of unknown length in place of ``body`` (server-sent events): sent
    with chunked transfer encoding, each chunk as soon as the iterator yields
    it, by the worker, which holds the connection until the iterator ends."""


Handler = Callable[[HttpRequest], HttpResponse]


def json_error_response(status: int, message: str) -> HttpResponse:
    return HttpResponse(status, [json.dumps({"error": message}).encode()])


def response_head(response: HttpResponse, length: int | None, keep_alive: bool) -> bytes:
    """Status line and headers for a body of ``length`` bytes (None: chunked);
    ``Connection: close`` when the server closes after it."""
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    lines = [
        f"HTTP/1.1 {response.status} {phrase}",
        f"Content-Type: {response.content_type}",
        "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}",
    ]
    lines += [f"{name}: {value}" for name, value in response.headers]
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def nbytes(buffer) -> int:
    """Bytes in one response body buffer (an array's ``len`` counts rows)."""
    return buffer.nbytes if isinstance(buffer, (np.ndarray, memoryview)) else len(buffer)


def drop_sent(views: list[memoryview], sent: int) -> None:
    """Remove the first ``sent`` bytes from ``views`` in place, after a
    ``sendmsg`` that may have stopped partway through a buffer."""
    while sent:
        first = views[0]
        if sent >= len(first):
            sent -= len(first)
            views.pop(0)
        else:
            views[0] = first[sent:]
            sent = 0
