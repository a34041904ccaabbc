"""Lets a test hold a python-backend model inside ``execute`` and release it.

Python models run in the daemon's interpreter, so a model.py written by a test
can ``from fakes import blocking_gate`` and meet the test on these events.
"""

from __future__ import annotations

import threading

entered = threading.Event()
release = threading.Event()
finalized: list[str] = []


def reset() -> None:
    entered.clear()
    release.clear()
    finalized.clear()
