"""Who may call which API: Triton's restricted-API groups plus the appliance's
loopback-only default for the control APIs. Transport-neutral: each transport
decides which API a request belongs to and how a refusal looks on its wire
(HTTP: ``protocol/http/access.py``, gRPC: ``protocol/grpc/access.py``).

The rules, in order, for a request to API ``a`` from peer ``p``:

1. ``a`` is in a group given as ``API[,API...]:KEY=VALUE`` (Triton's
   ``--http-restricted-api`` / ``--grpc-restricted-protocol``): the request
   must carry header ``KEY`` (name compared case-insensitively, value exactly)
   whoever sends it, loopback included.
2. Otherwise, ``a`` is one of ``LOOPBACK_ONLY_BY_DEFAULT``: served to loopback
   peers; other peers need header ``edgebox-api-key`` holding the key from
   ``api_key_file``, and are refused outright when no key is configured.
3. Otherwise, or when the request belongs to no API (the router answers 404),
   it is served.

Spec of the flags: https://github.com/triton-inference-server/server/blob/main/docs/customization_guide/inference_protocols.md#limit-endpoint-access-beta
Values are compared with ``hmac.compare_digest``. Objects here are immutable
and read from every connection thread at once.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

APIS = (
    "model-repository",
    "shared-memory",
    "statistics",
    "trace",
    "logging",
    "model-config",
    "health",
    "metadata",
    "inference",
)
"""Triton's API names, as ``--http-restricted-api`` spells them."""

LOOPBACK_ONLY_BY_DEFAULT = frozenset({"model-repository", "shared-memory", "trace", "logging"})
"""APIs that change what the appliance serves or where it writes: stricter than
Triton, which leaves every API open unless a group restricts it."""

API_KEY_HEADER = "edgebox-api-key"
"""The header that carries the ``api_key_file`` key."""

MIN_API_KEY_CHARS = 16

GROUP_FORMAT = "<API>[,<API>...]:<header>=<value>"

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
_KEY = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True)
class Restriction:
    """One ``API[,API...]:KEY=VALUE`` group."""

    apis: tuple[str, ...]
    header: str
    """As configured; lookups lower-case it, refusals show it as written."""
    value: str = field(repr=False)


@dataclass(frozen=True)
class Denial:
    """Why a request was refused: ``header`` is the header that would have let
    it through, or None when only a loopback peer may call ``api``."""

    api: str
    header: str | None


def parse_restrictions(specs: Iterable[str]) -> dict[str, Restriction]:
    """API name -> its group, from ``API[,API...]:KEY=VALUE`` strings, split as
    Triton 2.51 splits them (at the first ``:`` then the first ``=``).

    Raises ValueError for what Triton refuses at startup (bad format, unknown
    API, an API in two groups) and, stricter, for a header name or value no
    client could send."""
    restrictions: dict[str, Restriction] = {}
    for spec in specs:
        spec = str(spec)
        apis_text, _, setting = spec.partition(":")
        header, _, value = setting.partition("=")
        if not apis_text or not header or not value:
            raise ValueError(f"expected '{GROUP_FORMAT}', got '{spec}'")
        apis = tuple(apis_text.split(","))
        for api in apis:
            if api not in APIS:
                raise ValueError(
                    f"unknown API '{api}' in '{spec}'; expected one of {', '.join(APIS)}"
                )
        if not _TOKEN.fullmatch(header):
            raise ValueError(
                f"header name '{header}' in '{spec}' is not a valid HTTP header name "
                "(letters, digits and !#$%&'*+-.^_`|~)"
            )
        if not _VALUE.fullmatch(value):
            raise ValueError(
                f"the value for header '{header}' must be printable ASCII, "
                "without leading or trailing spaces"
            )
        restriction = Restriction(apis, header, value)
        for api in apis:
            if api in restrictions:
                raise ValueError(
                    f"API '{api}' is in more than one group; each API takes one header"
                )
            restrictions[api] = restriction
    return restrictions


def read_api_key(path: Path) -> str:
    """The key in ``path``: one line of at least 16 printable ASCII characters,
    the trailing newline dropped.

    Refused (ValueError) when the file can be read by every user, or changed by
    anyone but its owner: a key others can read guards nothing. Group read is
    allowed, so ``root:edgebox 0640`` works."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"'{path}' is not a regular file")
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read '{path}': {exc.strerror}") from None
    mode = stat.S_IMODE(info.st_mode)
    exposed = None
    if mode & stat.S_IROTH:
        exposed = "read by every user"
    elif mode & stat.S_IWOTH:
        exposed = "written by every user"
    elif mode & stat.S_IWGRP:
        exposed = "written by its group"
    if exposed:
        raise ValueError(
            f"'{path}' can be {exposed} (mode {mode:04o}); run: chmod 600 '{path}' "
            "(or 640 with the daemon's group)"
        )
    text = raw.decode("latin-1").removesuffix("\n").removesuffix("\r")
    if not _KEY.fullmatch(text):
        if not text:
            raise ValueError(f"'{path}' is empty; put the key on its first line")
        raise ValueError(f"the key in '{path}' must be one line of printable ASCII without spaces")
    if len(text) < MIN_API_KEY_CHARS:
        raise ValueError(
            f"the key in '{path}' has {len(text)} characters; use at least "
            f"{MIN_API_KEY_CHARS} (for example: openssl rand -hex 32 > '{path}')"
        )
    return text


def is_loopback(peer: str) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x; False for anything
    else, an unknown ("") or unparsable peer included."""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class AccessPolicy:
    """The decision for one request, given the API it belongs to.

    ``header_prefix`` is put before each group's header name: Triton's gRPC
    frontend looks for ``triton-grpc-protocol-<KEY>``, its HTTP one for
    ``<KEY>``."""

    def __init__(
        self,
        restrictions: Mapping[str, Restriction],
        api_key: str | None = None,
        header_prefix: str = "",
    ) -> None:
        self.restrictions = dict(restrictions)
        self.api_key = api_key
        self.header_prefix = header_prefix

    @classmethod
    def from_settings(cls, specs: Iterable[str], api_key_file: Path | None) -> AccessPolicy:
        """Built at startup from already-validated settings; raises ValueError
        if the key file changed into something unusable since."""
        api_key = read_api_key(api_key_file) if api_key_file is not None else None
        return cls(parse_restrictions(specs), api_key)

    def check(self, api: str | None, headers: Mapping[str, str], peer: str) -> Denial | None:
        """None to serve the request; a Denial to refuse it. ``headers`` has
        lower-cased names (HTTP and gRPC metadata both allow that)."""
        if api is None:
            return None
        restriction = self.restrictions.get(api)
        if restriction is not None:
            header = self.header_prefix + restriction.header
            if _matches(headers.get(header.lower()), restriction.value):
                return None
            return Denial(api, header)
        if api not in LOOPBACK_ONLY_BY_DEFAULT or is_loopback(peer):
            return None
        if self.api_key is None:
            return Denial(api, None)
        if _matches(headers.get(API_KEY_HEADER), self.api_key):
            return None
        return Denial(api, API_KEY_HEADER)

    def describe(self) -> str:
        """One line for the startup log; never shows a value or the key."""
        groups = {id(r): r for r in self.restrictions.values()}.values()
        parts = [f"{','.join(r.apis)} need header '{r.header}'" for r in groups]
        default = sorted(LOOPBACK_ONLY_BY_DEFAULT - set(self.restrictions))
        if default:
            how = (
                f"loopback or header '{API_KEY_HEADER}'"
                if self.api_key is not None
                else "loopback clients only"
            )
            parts.append(f"{','.join(default)} served to {how}")
        return "; ".join(parts)


def _matches(got: str | None, expected: str) -> bool:
    if got is None:
        return False
    return hmac.compare_digest(got.encode("utf-8"), expected.encode("utf-8"))
