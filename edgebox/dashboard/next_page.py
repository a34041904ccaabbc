"""Where a login may send the browser next: a path on this site, judged after
the normalisation a browser applies to a ``Location`` (WHATWG URL parsing,
https://url.spec.whatwg.org/#concept-basic-url-parser), since a check on the
raw text is what ``/%09/evil.example`` (a tab once form-decoded) slipped
through: the browser drops the tab and goes to ``//evil.example``."""

from __future__ import annotations

import re
from urllib.parse import quote

HOME = "/"
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
_SINGLE_DOT = {".", "%2e"}
_DOUBLE_DOT = {"..", ".%2e", "%2e.", "%2e%2e"}
_KEPT = "!#$%&'()*+,/:;=?@[]~"
"""Characters left as they are in the answer; anything else (controls, spaces,
non-ASCII) is percent-encoded, so the ``Location`` header never holds a
character a browser would drop or a header cannot carry."""


def same_site_path(target: str) -> str:
    """``target`` as the browser would read it, when that is a path on this
    site (dot segments resolved, query and fragment kept); else ``/``."""
    text = _TAB_OR_NEWLINE.sub("", target.strip(_C0_OR_SPACE))
    cut = min((i for i in (text.find("?"), text.find("#")) if i >= 0), default=len(text))
    path, rest = text[:cut].replace("\\", "/"), text[cut:]
    if not path.startswith("/") or path.startswith("//"):
        return HOME
    path = _without_dot_segments(path)
    if path.startswith("//"):
        return HOME
    return quote(path + rest, safe=_KEPT)


def _without_dot_segments(path: str) -> str:
    """The WHATWG path state's handling of ``.`` and ``..`` (percent-encoded
    dots included) on an absolute path; empty segments stay, as they do in a
    browser, which is how ``/..//evil`` becomes ``//evil``."""
    kept: list[str] = []
    segments = path.split("/")[1:]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        lowered = segment.lower()
        if lowered in _DOUBLE_DOT:
            if kept:
                kept.pop()
            if last:
                kept.append("")
        elif lowered in _SINGLE_DOT:
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/" + "/".join(kept)
