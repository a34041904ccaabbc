"""The daemon's handle on one isolated python model process
(``isolated_child.py``): starts it, has it load the model, runs requests
through shared memory, answers its BLS calls, stops it, and says why it ended.

Per request, tensors cost one copy each way in the daemon: inputs into the
input region (the child reads them in place), outputs out of the output
region into arrays of their own, so a response never points into memory the
next request reuses. The child adds one copy of each output into its region.

Custom metrics the model changed come with its ``initialized`` and
``result`` messages; the process's ``MetricMirror`` adds them to the
daemon's registry and takes them out again when the process is released.

The model's BLS calls arrive during an exchange (``complete_config``,
``initialize``, ``execute``), each under an id, and go to the process's
``isolated_bls.BlsServer``, which answers them on threads of its own.

One thread at a time runs an exchange with a process (the instance's
``execute`` caller, or the thread loading it); BLS workers only send their
answers; any thread may ``poll``, ``wait`` for or ``kill`` it.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import edgebox
from edgebox.backends.base import InferFunction, InstanceSpec, ModelContext
from edgebox.backends.python import custom_metrics
from edgebox.backends.python import isolated_messages as messages
from edgebox.backends.python.channel import Channel, ChannelClosed, close_fds
from edgebox.backends.python.isolated_bls import BlsServer
from edgebox.backends.python.tensor_region import TensorRegion, layout, read, write
from edgebox.errors import EdgeboxError, Unavailable
from edgebox.repository.config import config_to_dict
from edgebox.tensors import InferRequest, InferResponse

_log = logging.getLogger("edgebox.backends.python.isolated")

CHILD_MODULE = "edgebox.backends.python.isolated_child"
EXIT_WAIT_S = 5.0
"""How long a process whose channel closed gets to finish exiting before it is killed."""


_running: set[subprocess.Popen] = set()
"""Every model process started and not yet reaped, so none outlives the daemon."""
_running_lock = threading.Lock()


@atexit.register
def _kill_leftovers() -> None:
    """At the daemon's exit, kill and reap the model processes still running:
    those whose ``finalize`` or ``execute`` outlasted the shutdown's deadline."""
    with _running_lock:
        leftovers = list(_running)
    for popen in leftovers:
        try:
            popen.kill()
            popen.wait(EXIT_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass


class ProcessExited(Exception):
    """The process ended (or broke the protocol and was killed) mid-conversation."""


class ModelProcess:
    """One isolated model process and what the daemon holds of it (the
    channel, the two tensor regions, its metrics' mirror), from ``start``
    until ``release``."""

    def __init__(
        self,
        popen: subprocess.Popen,
        channel: Channel,
        memory_limit_mb: int,
        label: str = "python model process",
    ) -> None:
        self._popen = popen
        self._channel = channel
        self.memory_limit_mb = memory_limit_mb
        self._metrics = custom_metrics.MetricMirror(label, custom_metrics.registry)
        self._inputs: TensorRegion | None = None
        self._outputs: TensorRegion | None = None
        self._bls = BlsServer(label, channel, lambda: self.poll() is None)

    @classmethod
    def start(cls, label: str, memory_limit_mb: int) -> ModelProcess:
        """A fresh process, waiting for its first message. It inherits the
        daemon's stdout and stderr, so the model's prints and log lines land
        in the daemon's log, tagged with ``label`` and the pid."""
        channel, theirs = Channel.pair()
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        command = [
            sys.executable,
            "-m",
            CHILD_MODULE,
            "--socket-fd",
            str(theirs.fileno()),
            "--memory-limit-mb",
            str(memory_limit_mb),
            "--label",
            label,
            "--log-level",
            level if isinstance(level, str) else "INFO",
        ]
        # The daemon may run from a checkout rather than an install: the
        # child imports edgebox from where the daemon did.
        package_root = str(Path(edgebox.__file__).resolve().parent.parent)
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        try:
            popen = subprocess.Popen(
                command, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env
            )
        except OSError as exc:
            channel.close()
            raise Unavailable(f"{label}: cannot start a python model process: {exc}") from None
        finally:
            theirs.close()
        with _running_lock:
            _running.add(popen)
        return cls(popen, channel, memory_limit_mb, label)

    @property
    def pid(self) -> int:
        return self._popen.pid

    # -- loading ---------------------------------------------------------

    def complete_config(self, context: ModelContext) -> dict:
        """Import model.py in the process and run its ``auto_complete_config``;
        the completed config as a dict, or the load's EdgeboxError."""
        self._send({"op": "complete_config", **_context_header(context)})
        header, _fds = self._await("completed", context.infer)
        if messages.is_error(header):
            raise messages.error_from_header(header)
        return header["config"]

    def initialize(self, context: ModelContext, instance: InstanceSpec) -> None:
        """Create the instance's model object in the process and run its
        ``initialize``; its EdgeboxError when that fails."""
        self._inputs = TensorRegion.create("edgebox-inputs")
        self._outputs = TensorRegion.create("edgebox-outputs")
        header = {
            "op": "initialize",
            **_context_header(context),
            "instance": {
                "name": instance.name,
                "kind": instance.kind,
                "device_id": instance.device_id,
                "secondary_devices": [list(device) for device in instance.secondary_devices],
            },
        }
        self._send(header, fds=[self._inputs.fd, self._outputs.fd])
        reply, _fds = self._await("initialized", context.infer)
        if messages.is_error(reply):
            raise messages.error_from_header(reply)
        self._metrics.apply(reply.get("metrics"))

    # -- requests --------------------------------------------------------

    def execute(
        self, requests: Sequence[InferRequest], infer: InferFunction | None
    ) -> list[InferResponse | EdgeboxError]:
        """Run the requests in the process; ProcessExited when it ended first."""
        entries = []
        placed = []
        end = 0
        for request in requests:
            descriptors, sources, end = layout(request.inputs, end)
            entries.append(messages.request_header(request, descriptors))
            placed.append((descriptors, sources))
        buffer = self._inputs.writable(end)
        for descriptors, sources in placed:
            write(buffer, descriptors, sources)
        del placed
        self._send({"op": "execute", "requests": entries, "input_bytes": end})
        reply, fds = self._await("result", infer)
        if fds:
            self._inputs.close()
            self._inputs = TensorRegion(fds[0])
        self._metrics.apply(reply.get("metrics"))
        try:
            results = reply["results"]
            if len(results) != len(requests):
                raise ValueError(f"{len(results)} results for {len(requests)} requests")
            outputs = self._outputs.readable(int(reply["output_bytes"]))
            answers: list[InferResponse | EdgeboxError] = [
                messages.error_from_header(entry)
                if messages.is_error(entry)
                else messages.response_from_header(entry, lambda d: read(outputs, d, copy=True))
                for entry in results
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise self._protocol_broken(f"a malformed result: {exc}") from None
        return answers

    # -- stopping --------------------------------------------------------

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait(self, timeout_s: float | None = None) -> int:
        """The exit status (negative: the signal), killing the process if it
        has not exited within ``timeout_s``."""
        try:
            return self._popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self._popen.wait()

    def kill(self) -> None:
        try:
            self._popen.kill()
        except ProcessLookupError:
            pass

    def stop(self, finalize_timeout_s: float) -> int:
        """Run the model's ``finalize`` (if it was initialized) and let the
        process exit; killed after ``finalize_timeout_s``. Reaped and released."""
        if self._popen.poll() is None and finalize_timeout_s > 0:
            try:
                self._channel.send({"op": "finalize"})
            except ChannelClosed:
                pass
        code = self.wait(finalize_timeout_s)
        self.release()
        return code

    def release(self) -> None:
        """Close the channel and regions; the process must have exited."""
        with _running_lock:
            _running.discard(self._popen)
        self._metrics.close()
        self._channel.close()
        for region in (self._inputs, self._outputs):
            if region is not None:
                region.close()

    def describe_exit(self, code: int) -> str:
        return describe_exit(code, self.memory_limit_mb)

    # -- internals -------------------------------------------------------

    def _send(self, header: dict, payload=b"", fds: Sequence[int] = ()) -> None:
        try:
            self._channel.send(header, payload, fds)
        except ChannelClosed as exc:
            raise ProcessExited(str(exc)) from None

    def _await(self, op: str, infer: InferFunction | None) -> tuple[dict, list[int]]:
        """The reply ``op`` and the descriptor it may carry (a replaced input
        region), handing the model's BLS calls to the workers while it comes."""
        while True:
            try:
                header, payload, fds = self._channel.recv()
            except ChannelClosed as exc:
                raise ProcessExited(str(exc)) from None
            if header.get("op") == "infer":
                close_fds(fds)
                self._bls.submit(header, payload, infer)
                continue
            if header.get("op") != op:
                close_fds(fds)
                raise self._protocol_broken(f"'{header.get('op')}' while waiting for '{op}'")
            if len(fds) > 1 or (fds and not header.get("inputs_replaced")):
                close_fds(fds)
                raise self._protocol_broken(f"{len(fds)} unexpected descriptors")
            return header, fds

    def _protocol_broken(self, what: str) -> ProcessExited:
        _log.error("python model process %d sent %s; killing it", self.pid, what)
        self.kill()
        return ProcessExited(f"protocol error: {what}")


def describe_exit(code: int, memory_limit_mb: int) -> str:
    """``exited with signal SIGSEGV``: how a process ended, as its model's
    state and errors say it."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        text = f"exited with signal {name}"
        if -code == signal.SIGKILL:
            text += " (killed by the kernel's out-of-memory killer or by another process)"
        return text
    if code == messages.EXIT_OUT_OF_MEMORY:
        if memory_limit_mb:
            return f"reached its memory limit of {memory_limit_mb} MB"
        return "ran out of memory"
    return f"exited with code {code}"


def _context_header(context: ModelContext) -> dict:
    return {
        "name": context.name,
        "version": context.version,
        "config": config_to_dict(context.config),
        "model_dir": str(context.model_dir),
        "version_dir": str(context.version_dir),
        "bls": context.infer is not None,
    }
