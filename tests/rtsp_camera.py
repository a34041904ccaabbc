"""RtspTestCamera: ``scripts/rtsp_test_camera.py`` (GStreamer's RTSP server,
H.264 over RTP) run under the system's python3 on a free 127.0.0.1 port, for
tests that need a real network camera: one that can restart (at another
resolution), freeze (SIGSTOP: its sockets stay open, no frame comes) and
thaw, and that asks for a password. ``make test`` installs the packages."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "rtsp_test_camera.py"
SYSTEM_PYTHON = "/usr/bin/python3"
READY_TIMEOUT_S = 20.0


def rtsp_server_installed() -> bool:
    check = "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer"
    try:
        return subprocess.run([SYSTEM_PYTHON, "-c", check], capture_output=True).returncode == 0
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RtspTestCamera:
    def __init__(
        self,
        workdir: Path,
        *,
        user: str = "",
        password: str = "",
        width: int = 640,
        height: int = 360,
        fps: int = 15,
        stamp: bool = False,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.user, self.password = user, password
        self.width, self.height, self.fps = width, height, fps
        self.stamp = stamp
        """Frames carry the wall clock in their top rows (--stamp)."""
        self.port = 0
        self.process: subprocess.Popen | None = None

    def url(self, user: str | None = None, password: str | None = None) -> str:
        user = self.user if user is None else user
        password = self.password if password is None else password
        login = f"{user}:{password}@" if user else ""
        return f"rtsp://{login}127.0.0.1:{self.port}/cam"

    def start(self) -> RtspTestCamera:
        """Start and wait for its ``ready`` line. A restart keeps the port,
        retrying while the old socket lingers."""
        if not self.port:
            self.port = _free_port()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            problem = self._try_start(deadline)
            if problem is None:
                return self
            if time.monotonic() > deadline or "cannot listen" not in problem:
                raise RuntimeError(f"the RTSP test camera did not start: {problem}")

    def _try_start(self, deadline: float) -> str | None:
        log = (self.workdir / "camera.log").open("ab")
        command = [
            SYSTEM_PYTHON,
            str(SCRIPT),
            *("--port", str(self.port), "--width", str(self.width)),
            *("--height", str(self.height), "--fps", str(self.fps)),
        ]
        if self.user:
            command += ["--user", self.user, "--password", self.password]
        if self.stamp:
            command.append("--stamp")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log)
        log.close()
        line = b""
        while time.monotonic() < deadline and self.process.poll() is None:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.2)
            if ready:
                line = self.process.stdout.readline()
                break
        if line.startswith(b"ready "):
            return None
        self.stop()
        return (self.workdir / "camera.log").read_text(errors="replace")[-2000:] or "no ready line"

    def restart(self, width: int | None = None, height: int | None = None) -> RtspTestCamera:
        """Stop, then start on the same port, at another size if given."""
        self.stop()
        self.width = width or self.width
        self.height = height or self.height
        return self.start()

    def udp_sockets(self) -> int:
        """UDP sockets the camera holds: RTP over UDP opens them, over TCP
        (interleaved in the RTSP connection) it opens none."""
        inodes = set()
        for table in ("udp", "udp6"):
            try:
                lines = Path(f"/proc/{self.process.pid}/net/{table}").read_text().splitlines()
            except OSError:
                continue
            inodes.update(line.split()[9] for line in lines[1:])
        held = 0
        for fd in Path(f"/proc/{self.process.pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                held += 1
        return held

    def freeze(self) -> None:
        """Its connections stay open and no frame comes, as a hung camera's."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> RtspTestCamera:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
