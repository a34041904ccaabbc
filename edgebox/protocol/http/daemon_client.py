"""How a command (``edgebox rollout``) talks to a running daemon: JSON over
its KServe v2 HTTP port, with the headers access control asks for (``protocol/access_policy``):
the ``api_key_file`` key in ``edgebox-api-key``, or a restricted API's own
header. Loopback clients need neither, which is why ``DEFAULT_URL`` is
127.0.0.1.

Two failures are told apart, because an operator fixes them differently:
``DaemonRefused`` (the daemon answered with an error: its message is what to
show) and ``DaemonUnreachable`` (nothing answered: the daemon is down, or
``--url`` is wrong).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from http import HTTPStatus

DEFAULT_URL = "http://127.0.0.1:8000"


class DaemonRefused(Exception):
    """The daemon answered with an error status (or something that is not
    JSON); ``str()`` is its message. ``forbidden``: access control refused
    it (403), so the fix is a key or a header, not the request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.forbidden = status == HTTPStatus.FORBIDDEN


class DaemonUnreachable(Exception):
    """No HTTP answer at all: refused connection, unknown host, timeout."""


def daemon_url(text: str) -> str:
    """``--url`` as given (``HOST:PORT`` or ``http[s]://HOST:PORT[/PREFIX]``),
    as a base URL without a trailing slash; ValueError for anything else, so a
    typo is a usage error rather than a request sent somewhere odd."""
    url = text if "://" in text else f"http://{text}"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"expected an http:// or https:// URL, got '{text}'")
    if not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"expected HOST:PORT or http://HOST:PORT, got '{text}'")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError:
        raise ValueError(f"'{text}' has no valid port number") from None
    return url.rstrip("/")


class DaemonClient:
    """One command's connection settings; each call is one request. Proxies
    from the environment are not used: the daemon is on this machine or on
    the device's own network, never behind the proxy a shell may name."""

    def __init__(self, url: str, headers: Mapping[str, str], timeout_s: float) -> None:
        self.url = url
        self.headers = dict(headers)
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, path: str):
        return self._call("GET", path)

    def post(self, path: str):
        return self._call("POST", path)

    def _call(self, method: str, path: str):
        request = urllib.request.Request(
            self.url + path,
            data=b"" if method == "POST" else None,
            headers=self.headers,
            method=method,
        )
        try:
            with self._opener.open(request, timeout=self.timeout_s) as reply:
                status, body = reply.status, reply.read()
        except urllib.error.HTTPError as error:
            with error:
                raise DaemonRefused(error.code, _error_message(error.code, error.read())) from None
        except TimeoutError:
            raise self._unanswered() from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise self._unanswered() from None
            raise self._unreachable(error.reason) from None
        except (OSError, http.client.HTTPException) as error:
            raise self._unreachable(error) from None
        try:
            return json.loads(body)
        except ValueError:
            raise DaemonRefused(
                status,
                f"{self.url}{path} did not answer JSON; is --url the daemon's HTTP port "
                "(not the dashboard's or the metrics')?",
            ) from None

    def _unanswered(self) -> DaemonUnreachable:
        return DaemonUnreachable(
            f"no answer from {self.url} within {self.timeout_s:g} s (--timeout-s)"
        )

    def _unreachable(self, reason: object) -> DaemonUnreachable:
        return DaemonUnreachable(
            f"cannot reach the daemon at {self.url}: {reason or 'no HTTP answer'}; is edgebox "
            "running (systemctl status edgebox), and is --url its HTTP port?"
        )


def _error_message(status: int, body: bytes) -> str:
    """The ``{"error": ...}`` text every edgebox endpoint answers with, or
    the status alone when something else answered."""
    try:
        message = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status} with no edgebox error message; is --url the daemon's HTTP port?"
    return str(message)
