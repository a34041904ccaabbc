"""Counts how many requests python-backend models executed, per model name:
model.py files written by tests import it (they run in the same interpreter)."""

from __future__ import annotations

import collections

requests_seen: collections.Counter = collections.Counter()
batch_sizes: list[int] = []
