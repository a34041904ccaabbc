"""Triton's ``--cache-config <cache>,<key>=<value>`` entries, read into the
one cache edgebox has: Triton's ``local`` cache and its ``size`` in bytes.

Entries are read as Triton 2.51 reads them: the flag may repeat, and a key
given twice keeps its last value (``local,size=1048576`` then
``local,size=2048`` is a 2048-byte cache). Stricter than Triton, whose local
cache parses the size with ``stoull`` and ignores keys it does not know, a
size must be a plain positive number of bytes and an unknown key is refused.
Other caches (``redis``, a custom library) load shared libraries edgebox
does not run, so naming one is refused rather than ignored.
"""

from __future__ import annotations

from collections.abc import Iterable

FORMAT = "<cache>,<key>=<value>"
LOCAL = "local"
"""The only cache implementation edgebox has."""


def cache_size_bytes(entries: Iterable[str]) -> int:
    """The local cache's size in bytes from ``--cache-config`` entries; 0 when
    there are none (no cache). ValueError says what is wrong with an entry,
    quoting it."""
    settings: dict[str, str] = {}
    given = False
    for entry in entries:
        entry = str(entry)
        given = True
        cache, _, setting = entry.partition(",")
        key, equals, value = setting.partition("=")
        if not cache or not key or not equals:
            raise ValueError(f"expected '{FORMAT}', got '{entry}'")
        if cache != LOCAL:
            raise ValueError(
                f"cache '{cache}' in '{entry}' is not supported: edgebox has only "
                f"Triton's '{LOCAL}' cache ('{LOCAL},size=<bytes>')"
            )
        if key != "size":
            raise ValueError(
                f"unknown key '{key}' in '{entry}': the {LOCAL} cache takes only 'size'"
            )
        settings[key] = value
    if not given:
        return 0
    text = settings["size"]
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"the {LOCAL} cache's size must be a positive number of bytes, got '{text}'"
        )
    return int(text)
