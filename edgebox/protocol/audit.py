"""Repository control over HTTP and gRPC leaves a journal line naming what
was loaded or unloaded, through which API, from which address, and how it
ended (edgebox/audit.py). A load that carries model files first leaves one
line per file, with its size and SHA-256, before anything is checked or
written, so the journal shows what was sent even if the load then fails:

    Repository: load file api=http from=10.0.0.3 model=lane file=1/model.onnx bytes=82 sha256=9f2c..
    Repository: load api=grpc from=10.0.0.3 model=lane_pipeline result=ok
    Repository: unload api=http from=127.0.0.1 model=nope result=failed error="..."
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import TypeVar

from edgebox.audit import audit
from edgebox.repository.override_files import FILE_PREFIX, is_file_parameter

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


def audited_load(
    api: str,
    peer: str,
    model: str,
    decode: Callable[[], dict],
    load: Callable[[dict], None],
) -> None:
    """``load(decode())``, logged: ``decode`` turns the transport's
    parameters into the control's (HTTP's base64 into bytes), and may refuse
    them; each file it yields is logged before ``load`` runs."""

    def work() -> None:
        parameters = decode()
        for key in sorted(k for k in parameters if is_file_parameter(k)):
            data = parameters[key]
            if isinstance(data, bytes):
                audit(
                    log,
                    "Repository",
                    "load file",
                    api=api,
                    **{"from": peer or None},
                    model=model,
                    file=key[len(FILE_PREFIX) :],
                    bytes=len(data),
                    sha256=hashlib.sha256(data).hexdigest(),
                )
        load(parameters)

    audited("load", api, peer, model, work)
