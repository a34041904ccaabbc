"""A client on its own thread for scheduler tests: it calls ``infer`` on a
batcher once, at construction, and keeps the response or the exception;
``finished`` is set when the call returned either way."""

from __future__ import annotations

import threading

from edgebox.tensors import InferRequest


class Caller(threading.Thread):
    def __init__(self, batcher, req: InferRequest) -> None:
        super().__init__(daemon=True)
        self.batcher, self.req = batcher, req
        self.response = self.error = None
        self.finished = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            self.response = self.batcher.infer(self.req)
        except Exception as exc:
            self.error = exc
        self.finished.set()
