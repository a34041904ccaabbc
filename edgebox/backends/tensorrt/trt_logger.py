"""The one TensorRT logger of the process, which can also catch what TensorRT
says on one thread.

TensorRT keeps a single logger pointer per process: a runtime or builder
created with another logger while one exists logs through the first. So
edgebox makes one logger per ``tensorrt`` module and hands the same object to
every ``trt.Runtime``; code that builds engines in the same process (the
hardware tests, ``edgebox build-engine``) should use it too, or deserialization
errors may go to their logger instead.

Messages go to Python logging (``edgebox.backends.tensorrt.trt``): errors as
errors, warnings as warnings, INFO as debug, VERBOSE dropped. Inside
``capture()`` the errors TensorRT logs on the calling thread are also
collected, which is how a failed ``deserialize_cuda_engine`` (it returns None)
gets its reason.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

log = logging.getLogger("edgebox.backends.tensorrt.trt")

_LEVELS = {
    "INTERNAL_ERROR": logging.ERROR,
    "ERROR": logging.ERROR,
    "WARNING": logging.WARNING,
    "INFO": logging.DEBUG,
}
_CAPTURED = ("INTERNAL_ERROR", "ERROR")

_loggers: dict[int, object] = {}
_lock = threading.Lock()


def tensorrt_logger(trt):
    """The process's logger for this ``tensorrt`` module (created on first use)."""
    with _lock:
        entry = _loggers.get(id(trt))
        if entry is None:
            entry = (trt, _make_logger(trt))
            _loggers[id(trt)] = entry
        return entry[1]


def _make_logger(trt):
    class EdgeboxTensorRTLogger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self._local = threading.local()

        def log(self, severity, msg) -> None:
            name = getattr(severity, "name", str(severity).rsplit(".", 1)[-1])
            level = _LEVELS.get(name)
            if level is None:
                return
            log.log(level, "%s", msg)
            captured = getattr(self._local, "messages", None)
            if captured is not None and name in _CAPTURED:
                captured.append(str(msg))

        @contextlib.contextmanager
        def capture(self) -> Iterator[list[str]]:
            """Collect the errors TensorRT logs on this thread meanwhile."""
            previous = getattr(self._local, "messages", None)
            self._local.messages = []
            try:
                yield self._local.messages
            finally:
                self._local.messages = previous

    return EdgeboxTensorRTLogger()
