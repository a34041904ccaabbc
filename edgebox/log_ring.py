"""``LogRing``: the daemon's last log records kept in memory, for the
dashboard's Logs page (docs/dashboard.md, "Logs"), so an operator without a
shell on the device still reads what the journal holds.

Bounded twice, by records and by characters, and each record's text is cut
at ``max_line_chars``, so a burst of long tracebacks cannot grow it. Every
text is masked (``secrets_mask``) before it is kept: the page may show
nothing the settings file hides. ``emit`` runs on the logging thread's hot
path: one mask, one append, and oldest records dropped under a short lock.
"""

from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass

from edgebox.secrets_mask import mask_secrets

MAX_RECORDS = 2000
MAX_CHARS = 1024 * 1024
MAX_LINE_CHARS = 2000
CUT = " ..."


@dataclass(frozen=True)
class LogLine:
    id: int
    time: float
    level: str
    levelno: int
    logger: str
    message: str

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "time": self.time,
            "level": self.level,
            "logger": self.logger,
            "message": self.message,
        }


class LogRing(logging.Handler):
    """Installed on the root logger by the daemon (``install``); read by the
    dashboard's request threads (``lines``)."""

    def __init__(
        self,
        max_records: int = MAX_RECORDS,
        max_chars: int = MAX_CHARS,
        max_line_chars: int = MAX_LINE_CHARS,
    ) -> None:
        super().__init__()
        self._max_records = max_records
        self._max_chars = max_chars
        self._max_line_chars = max_line_chars
        self._ring: collections.deque[LogLine] = collections.deque()
        self._chars = 0
        self._last_id = 0
        self._ring_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a bad format string: keep what was logged, as text
            text = f"{record.msg!r} {record.args!r}"
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            text = f"{text}\n{record.exc_text}"
        text = mask_secrets(text)
        if len(text) > self._max_line_chars:
            text = text[: self._max_line_chars - len(CUT)] + CUT
        with self._ring_lock:
            self._last_id += 1
            line = LogLine(
                self._last_id, record.created, record.levelname, record.levelno, record.name, text
            )
            self._ring.append(line)
            self._chars += len(text)
            while len(self._ring) > self._max_records or self._chars > self._max_chars:
                self._chars -= len(self._ring.popleft().message)

    def lines(self, min_level: int = logging.NOTSET, text: str = "", limit: int = 200) -> list:
        """The newest ``limit`` kept lines at ``min_level`` or above whose
        logger name or message holds ``text`` (any case), oldest first."""
        with self._ring_lock:
            kept = list(self._ring)
        needle = text.casefold()
        chosen: list[LogLine] = []
        for line in reversed(kept):
            if len(chosen) >= limit:
                break
            if line.levelno < min_level:
                continue
            found = needle in line.message.casefold() or needle in line.logger.casefold()
            if needle and not found:
                continue
            chosen.append(line)
        chosen.reverse()
        return chosen

    def install(self) -> LogRing:
        """Adds the ring to the root logger, so it sees what the journal
        sees; itself."""
        logging.getLogger().addHandler(self)
        return self
