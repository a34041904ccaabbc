"""A real HTTP(S) server for artifacts on 127.0.0.1, and what the tests ask of it.

``ArtifactServer(root)`` serves the files under ``root`` on a free port, each
in its own thread, with ``Range: bytes=N-`` answered 206 and a Content-Range,
as S3 and nginx do. A test can make it misbehave the way real links and
servers do, one path at a time:

- ``cut_next(name, after_bytes)``: the next response for ``name`` declares the
  full length, sends ``after_bytes`` bytes of body and drops the connection
  (a link that breaks mid-download);
- ``omit_length(name)``: responses for ``name`` carry no Content-Length and end
  by closing the connection (a server that streams);
- ``ignore_range(name)``: answer every request for ``name`` 200 with the whole
  file, as a server without Range support does;
- ``redirect(name, location)``: answer 302 to ``location``.

It records what it saw: ``requests(name)`` (the Range header and status of
each request) and ``bytes_sent(name)`` (body bytes actually written).

``self_signed_certificate(folder)`` makes a certificate for 127.0.0.1 with
``cryptography``; ``ArtifactServer(root, tls=...)`` then serves HTTPS, and the
certificate file is the ``ca_file`` a client needs to trust it.

    with ArtifactServer(tmp_path / "store") as server:
        url = server.url("lane-7.tar.gz")
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["ArtifactServer", "SeenRequest", "TlsFiles", "self_signed_certificate"]


@dataclass(frozen=True)
class TlsFiles:
    certificate: Path
    private_key: Path


@dataclass(frozen=True)
class SeenRequest:
    range: str | None
    status: int


def self_signed_certificate(folder: Path) -> TlsFiles:
    """A P-256 certificate for 127.0.0.1 and localhost, valid for a day."""
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "edgebox test artifact server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = TlsFiles(folder / "server.crt", folder / "server.key")
    files.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    files.private_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


class ArtifactServer:
    """Serves ``root`` on 127.0.0.1 from ``start()`` (or ``with``) to ``stop()``."""

    def __init__(self, root: Path, tls: TlsFiles | None = None) -> None:
        self.root = Path(root)
        self._tls = tls
        self._lock = threading.Lock()
        self._cuts: dict[str, int] = {}
        self._no_length: set[str] = set()
        self._no_range: set[str] = set()
        self._redirects: dict[str, str] = {}
        self._requests: dict[str, list[SeenRequest]] = {}
        self._bytes_sent: dict[str, int] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ArtifactServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        httpd.daemon_threads = True
        if self._tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self._tls.certificate, self._tls.private_key)
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        # shutdown() waits for the loop's next poll: a short one keeps teardown short.
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=10)
            self._httpd = None

    def __enter__(self) -> ArtifactServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start the server first"
        return self._httpd.server_address[1]

    def url(self, name: str) -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}/{name}"

    def cut_next(self, name: str, after_bytes: int) -> None:
        with self._lock:
            self._cuts[name] = after_bytes

    def omit_length(self, name: str) -> None:
        with self._lock:
            self._no_length.add(name)

    def ignore_range(self, name: str) -> None:
        with self._lock:
            self._no_range.add(name)

    def redirect(self, name: str, location: str) -> None:
        with self._lock:
            self._redirects[name] = location

    def requests(self, name: str) -> list[SeenRequest]:
        with self._lock:
            return list(self._requests.get(name, []))

    def bytes_sent(self, name: str) -> int:
        with self._lock:
            return self._bytes_sent.get(name, 0)

    def _plan(self, name: str, range_header: str | None, status: int) -> tuple[int | None, bool]:
        """Record the request; (cut after, send a length) for its response."""
        with self._lock:
            self._requests.setdefault(name, []).append(SeenRequest(range_header, status))
            return self._cuts.pop(name, None), name not in self._no_length

    def _sent(self, name: str, count: int) -> None:
        with self._lock:
            self._bytes_sent[name] = self._bytes_sent.get(name, 0) + count


def _handler_for(server: ArtifactServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            name = unquote(urlsplit(self.path).path).lstrip("/")
            range_header = self.headers.get("Range")
            with server._lock:
                location = server._redirects.get(name)
                honour_range = name not in server._no_range
            if location is not None:
                server._plan(name, range_header, 302)
                self.send_response(302)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path = (server.root / name).resolve()
            if not path.is_relative_to(server.root.resolve()) or not path.is_file():
                server._plan(name, range_header, 404)
                self.send_error(404)
                return
            data = path.read_bytes()
            start = _range_start(range_header) if honour_range else None
            if start is not None and start >= len(data):
                server._plan(name, range_header, 416)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 200 if start is None else 206
            cut, send_length = server._plan(name, range_header, status)
            body = data[start or 0 :]
            self.send_response(status)
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            if send_length:
                self.send_header("Content-Length", str(len(body)))
            if cut is not None or not send_length:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if cut is not None:
                body = body[:cut]
            self.wfile.write(body)
            self.wfile.flush()
            server._sent(name, len(body))

    return Handler


def _range_start(header: str | None) -> int | None:
    if header is None or not header.startswith("bytes=") or not header.endswith("-"):
        return None
    first = header[len("bytes=") : -1]
    return int(first) if first.isdigit() else None
