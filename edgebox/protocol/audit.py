"""Repository control over HTTP and gRPC leaves a journal line naming what
was loaded or unloaded, through which API, from which address, and how it
ended (edgebox/audit.py):

    Repository: load api=grpc from=10.0.0.3 model=lane_pipeline result=ok
    Repository: unload api=http from=127.0.0.1 model=nope result=failed error="..."
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from edgebox.audit import audit

log = logging.getLogger(__name__)

T = TypeVar("T")


def audited(action: str, api: str, peer: str, model: str, work: Callable[[], T]) -> T:
    """``work()``, logged with its outcome; exceptions pass through."""
    where = {"api": api, "from": peer or None, "model": model}
    try:
        result = work()
    except Exception as error:
        audit(log, "Repository", action, logging.WARNING, **where, result="failed", error=error)
        raise
    audit(log, "Repository", action, **where, result="ok")
    return result
