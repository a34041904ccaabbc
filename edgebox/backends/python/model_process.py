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
``initialize``, ``execute``), each under an id; several may be in flight at
once. Each runs on a worker thread of the process's own (at most
``MAX_CONCURRENT_BLS`` at a time, the rest queue) and is answered under its
id, its tensors in a payload of its own. A worker whose process ended
meanwhile drops its answer: the exchange fails on its own (``ProcessExited``).

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
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import edgebox
from edgebox.backends.base import InferFunction, InstanceSpec, ModelContext
from edgebox.backends.python import custom_metrics
from edgebox.backends.python.channel import Channel, ChannelClosed
from edgebox.backends.python.isolated_messages import (
    EXIT_OUT_OF_MEMORY,
    error_from_header,
    error_header,
    is_error,
    request_from_header,
    request_header,
    response_from_header,
    response_header,
)
from edgebox.backends.python.tensor_region import TensorRegion, layout, read, write
from edgebox.errors import EdgeboxError, ErrorCode, Unavailable
from edgebox.repository.config import config_to_dict
from edgebox.tensors import InferRequest, InferResponse

_log = logging.getLogger("edgebox.backends.python.isolated")

CHILD_MODULE = "edgebox.backends.python.isolated_child"
EXIT_WAIT_S = 5.0
"""How long a process whose channel closed gets to finish exiting before it is killed."""
MAX_CONCURRENT_BLS = 16
"""BLS calls of one process served at once; more wait their turn in a queue
(``BlsWorkers``)."""


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


class BlsWorkers:
    """Runs one process's BLS calls, up to ``MAX_CONCURRENT_BLS`` at once on
    daemon threads started as calls come (and ended once none wait); the
    rest wait in a FIFO queue. Nothing is dropped: the queue holds what the
    model sent, and each call's thread in the model waits for its answer.
    ``submit`` is called by the exchange's thread."""

    def __init__(self, label: str, serve: Callable[..., None]) -> None:
        self._label = label
        self._serve = serve
        self._lock = threading.Lock()
        self._queue: deque[tuple] = deque()
        self._threads = 0

    def submit(self, *call: object) -> None:
        with self._lock:
            self._queue.append(call)
            if self._threads >= MAX_CONCURRENT_BLS:
                return
            self._threads += 1
        threading.Thread(target=self._work, name=f"bls-{self._label}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._threads -= 1
                    return
                call = self._queue.popleft()
            try:
                self._serve(*call)
            except ProcessExited:
                pass
            except Exception:
                _log.exception("%s: serving a BLS request failed", self._label)


class ModelProcess:
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
        self._bls = BlsWorkers(label, self._serve_bls)

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
        if is_error(header):
            raise error_from_header(header)
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
        if is_error(reply):
            raise error_from_header(reply)
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
            entries.append(request_header(request, descriptors))
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
                error_from_header(entry)
                if is_error(entry)
                else response_from_header(entry, lambda d: read(outputs, d, copy=True))
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
                _close(fds)
                self._bls.submit(header, payload, infer)
                continue
            if header.get("op") != op:
                _close(fds)
                raise self._protocol_broken(f"'{header.get('op')}' while waiting for '{op}'")
            if len(fds) > 1 or (fds and not header.get("inputs_replaced")):
                _close(fds)
                raise self._protocol_broken(f"{len(fds)} unexpected descriptors")
            return header, fds

    def _serve_bls(self, header: dict, payload: bytearray, infer: InferFunction | None) -> None:
        """On a BLS worker: run the model's BLS request as any other request,
        and send back its response or error under the request's id; only the
        model's own request fails if it is bad. ProcessExited when the
        process ended meanwhile."""
        call_id = header.get("id")
        if self.poll() is not None:
            raise ProcessExited("the process ended before its BLS request was served")
        try:
            request = request_from_header(header["request"], lambda d: read(payload, d, copy=False))
        except (KeyError, TypeError, ValueError) as exc:
            self._send(
                {
                    "op": "infer_result",
                    "id": call_id,
                    **error_header(EdgeboxError(f"BLS request: {exc}", ErrorCode.INVALID_ARG)),
                }
            )
            return
        if infer is None:
            error = EdgeboxError(
                f"BLS request to model '{request.model_name}': no inference function was "
                "given to the python backend, so other models cannot be called",
                ErrorCode.UNAVAILABLE,
            )
            self._send({"op": "infer_result", "id": call_id, **error_header(error)})
            return
        try:
            response = infer(request)
        except EdgeboxError as err:
            self._send({"op": "infer_result", "id": call_id, **error_header(err)})
            return
        except Exception as exc:
            _log.exception("BLS request to model '%s' failed", request.model_name)
            error = EdgeboxError(
                f"BLS request to model '{request.model_name}': {type(exc).__name__}: {exc}"
            )
            self._send({"op": "infer_result", "id": call_id, **error_header(error)})
            return
        descriptors, sources, end = layout(response.outputs)
        data = bytearray(end)
        write(data, descriptors, sources)
        self._send(
            {
                "op": "infer_result",
                "id": call_id,
                "response": response_header(response, descriptors),
            },
            data,
        )

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
    if code == EXIT_OUT_OF_MEMORY:
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


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
