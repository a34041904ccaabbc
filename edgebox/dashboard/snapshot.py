"""A stream's latest frame as a download (``/api/v1/streams/<name>/snapshot.jpg``):
the same JPEG the Streams page shows, named for the stream and the frame's
UTC time so saved snapshots sort and never overwrite each other."""

from __future__ import annotations

import time

from edgebox.streams.settings import STREAM_NAME

MAX_QUOTED_CHARS = 80


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a stream's (the client's text, quoted and cut
    short), or None. A name that passes holds only letters, digits, ``_``,
    ``.`` and ``-``, so it is safe in a header and a file name."""
    if STREAM_NAME.fullmatch(name):
        return None
    quoted = repr(name[:MAX_QUOTED_CHARS]) + ("…" if len(name) > MAX_QUOTED_CHARS else "")
    return (
        f"stream name {quoted}: expected letters, digits, '_', '.' and '-' "
        "(64 at most, starting with a letter or digit)"
    )


def snapshot_filename(name: str, frame_time: float) -> str:
    """``road-20260128T120102Z.jpg``; ``name`` must have passed ``name_problem``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(frame_time))
    return f"{name}-{stamp}.jpg"
