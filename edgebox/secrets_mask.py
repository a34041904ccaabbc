"""``mask_secrets``: the one place that hides credentials in text shown
outside the settings file. A stream's source travels further than the file
it was configured in (the journal, MQTT status, the dashboard and its API),
and so do reasons quoting it: OpenCV and GStreamer errors may echo the
whole pipeline. Everything that shows a source or a reason goes through
here (docs/security.md, "Secrets").

Masked, anywhere in the text:

- a URL's user info: ``rtsp://user:pw@cam`` becomes ``rtsp://user:***@cam``,
  ``rtsp://token@cam`` becomes ``rtsp://***@cam``;
- the value of any ``name=value`` whose name says credential: GStreamer
  properties (``user-id``, ``user-pw``, ``proxy-pw``, ``passphrase``,
  ``extra-headers``, ...) and query parameters (``?user=admin&pwd=x``).

Masking more than needed is the safe mistake: a path with an ``@`` in it
loses its start. Masked text masks to itself.
"""

from __future__ import annotations

import logging
import re

MASK = "***"
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^\s\"'<>]*)@")
_NAME_VALUE = re.compile(
    r"(?P<name>\b[A-Za-z][\w-]*)(?P<eq>\s*=\s*)(?P<value>"
    r"\\?\"(?:[^\"\\]|\\[^\"])*(?:\\?\")?"  # "...", or \"...\" inside a repr
    r"|\\?'(?:[^'\\]|\\[^'])*(?:\\?')?"  # '...', or \'...\'
    r"|[^\s!&\"']+)"
)
_SECRET_WORDS = frozenset(
    {
        "auth",
        "authentication",
        "authorization",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "apikey",
        "passphrase",
        "pass",
        "passwd",
        "password",
        "pw",
        "pwd",
        "secret",
        "token",
    }
)
_SECRET_NAMES = frozenset(
    {
        "access-key",
        "access-key-id",
        "api-key",
        "extra-headers",
        "key",
        "login",
        "private-key",
        "proxy-id",
        "user",
        "user-id",
        "userid",
        "username",
        "user-name",
    }
)


def mask_secrets(text: str) -> str:
    """``text`` with every credential it holds replaced by ``***``."""
    if "=" not in text and "@" not in text:
        return text
    text = _URL_USERINFO.sub(_masked_userinfo, text)
    return _NAME_VALUE.sub(_masked_value, text)


def is_secret_name(name: str) -> bool:
    """Whether a ``name=value`` with this name holds a credential."""
    lowered = name.lower().replace("_", "-")
    return lowered in _SECRET_NAMES or any(w in _SECRET_WORDS for w in lowered.split("-"))


class MaskSecrets(logging.Filter):
    """A logger filter that masks a record's message and traceback, for
    loggers whose exceptions may quote a source (an OpenCV error naming the
    pipeline it could not open)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # the handler reports a bad format string, as unfiltered
            return True
        record.msg, record.args = mask_secrets(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        return True


def _masked_userinfo(match: re.Match[str]) -> str:
    info = match["info"]
    user, colon, _ = info.partition(":")
    shown = f"{user}:{MASK}" if colon and user and "/" not in user else MASK
    return f"{match['scheme']}{shown}@"


def _masked_value(match: re.Match[str]) -> str:
    if is_secret_name(match["name"]):
        return f"{match['name']}{match['eq']}{MASK}"
    inner = _NAME_VALUE.sub(_masked_value, match["value"])  # location="...?pwd=..."
    return f"{match['name']}{match['eq']}{inner}"
