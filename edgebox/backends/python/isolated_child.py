"""The process an isolated python model runs in:
``python -m edgebox.backends.python.isolated_child --socket-fd N``.

It drives the model with the in-process backend's own code (``runner.Backend``
and ``instance.PythonInstance``), so ``model.py`` meets exactly the contract
it meets in the daemon: the same module import, ``auto_complete_config``,
``initialize`` arguments, request wrapping, per-response errors and output
checks. It serves the daemon's messages one at a time, in this order:
``complete_config`` (first process of a version only), ``initialize``, then
``execute`` any number of times, then ``finalize``.

Inputs are read in place from the daemon's shared-memory region, without a
copy. If the model keeps a reference to an input array past ``execute`` (a
tracker keeping the last frame), the region it points into is given up and a
fresh one is sent to the daemon, so the next request cannot overwrite what
the model kept.

BLS calls from the model go to the daemon as ``infer`` messages
(``isolated_bls.BlsCalls``), several at once if the model makes them so: a
reader thread takes every message the daemon sends, hands each
``infer_result`` to the call waiting on its id, and queues the rest for the
serving thread.

Custom metrics the model creates (``pb_utils.MetricFamily``) live in this
process's registry; the families that changed ride on the next
``initialized`` or ``result`` message (``metrics``), and the daemon adds
them to the registry it exports (``custom_metrics.MetricMirror``).

Exit status: 0 after ``finalize`` or once the daemon closes the channel (it
has exited), ``EXIT_OUT_OF_MEMORY`` after the model ran out of memory (the
daemon restarts it: a leak is released), anything else is a crash.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import queue
import resource
import select
import signal
import socket
import sys
import threading
from pathlib import Path

import numpy as np
from google.protobuf import json_format

from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import custom_metrics, runner
from edgebox.backends.python import isolated_messages as messages
from edgebox.backends.python.channel import Channel, ChannelClosed, close_fds
from edgebox.backends.python.instance import PythonInstance
from edgebox.backends.python.isolated_bls import BlsCalls
from edgebox.backends.python.tensor_region import TensorRegion, layout, read, write
from edgebox.errors import EdgeboxError
from edgebox.repository.config import ModelConfig, config_to_dict
from edgebox.tensors import InferResponse

_log = logging.getLogger("edgebox.backends.python.isolated_child")
_OWN_REFERENCES = 3


class ChildServer:
    """Answers the daemon's messages on ``channel`` until told to finalize or
    the daemon goes away. The serving thread runs the model; a reader thread
    receives everything (``_read``); the model's threads wait on their BLS
    replies (``BlsCalls``)."""

    def __init__(self, channel: Channel, memory_limit_mb: int) -> None:
        self._channel = channel
        self._memory_limit_mb = memory_limit_mb
        self._backend = runner.Backend()
        self._context: ModelContext | None = None
        self._instance: PythonInstance | None = None
        self._inputs: TensorRegion | None = None
        self._outputs: TensorRegion | None = None
        self._out_of_memory: MemoryError | None = None
        self._metrics = custom_metrics.ChangeFeed(custom_metrics.registry)
        self._inbox: queue.SimpleQueue[tuple[dict, list[int]] | None] = queue.SimpleQueue()
        """The daemon's messages other than BLS replies, for the serving
        thread; None once the channel closed. Unbounded: the daemon sends one
        at a time and waits for its answer."""
        self._bls = BlsCalls(channel)
        self._reader_exit = 0
        """The exit status once the reader stopped: 0 when the daemon closed
        the channel, 2 when its messages could not be read."""

    def serve(self) -> int:
        threading.Thread(target=self._read, name="daemon-reader", daemon=True).start()
        while True:
            message = self._inbox.get()
            if message is None:
                return self._reader_exit
            header, fds = message
            op = header.get("op")
            try:
                if op == "complete_config":
                    self._complete_config(header)
                elif op == "initialize":
                    self._initialize(header, fds)
                    fds = []
                elif op == "execute":
                    self._execute(header)
                    if self._out_of_memory is not None:
                        return messages.EXIT_OUT_OF_MEMORY
                elif op == "finalize":
                    if self._instance is not None:
                        self._instance.close()
                    self._channel.send({"op": "finalized"})
                    return 0
                else:
                    _log.error("unknown message '%s' from the daemon; exiting", op)
                    return 2
            except ChannelClosed:
                return 0
            except MemoryError:
                return messages.EXIT_OUT_OF_MEMORY
            finally:
                close_fds(fds)

    def _read(self) -> None:
        """The reader thread: BLS replies to their callers, the rest to the
        serving thread; once the channel closes (or breaks), every waiting
        BLS caller fails and the serving thread is told."""
        try:
            while True:
                header, payload, fds = self._channel.recv()
                if header.get("op") != "infer_result":
                    self._inbox.put((header, fds))
                    continue
                close_fds(fds)
                self._bls.answer(header, payload)
        except Exception as exc:
            if not isinstance(exc, ChannelClosed):
                _log.exception("reading the daemon's messages failed; exiting")
                self._reader_exit = 2
                exc = ChannelClosed(f"reading the daemon's messages failed: {exc}")
            self._bls.close(exc)
            self._inbox.put(None)

    # -- messages --------------------------------------------------------

    def _complete_config(self, header: dict) -> None:
        context = self._context_from(header)
        try:
            self._backend.complete_config(context)
        except EdgeboxError as err:
            self._channel.send({"op": "completed", **messages.error_header(err)})
            return
        self._context = context
        self._channel.send({"op": "completed", "config": config_to_dict(context.config)})

    def _initialize(self, header: dict, fds: list[int]) -> None:
        if len(fds) != 2:
            raise ChannelClosed(f"initialize came with {len(fds)} descriptors, expected 2")
        self._inputs, self._outputs = TensorRegion(fds[0]), TensorRegion(fds[1])
        if self._context is None:
            self._context = self._context_from(header)
        spec = header["instance"]
        _label_log(
            f"model '{self._context.name}' version {self._context.version} "
            f"instance '{spec['name']}'"
        )
        instance = InstanceSpec(
            spec["name"],
            spec["kind"],
            spec["device_id"],
            tuple((kind, device) for kind, device in spec["secondary_devices"]),
        )
        try:
            self._instance = self._backend.load_instance(self._context, instance)
        except EdgeboxError as err:
            self._channel.send({"op": "initialized", **messages.error_header(err)})
            return
        self._watch_memory_errors()
        self._channel.send(self._with_metrics({"op": "initialized"}))

    def _execute(self, header: dict) -> None:
        size = int(header["input_bytes"])
        region = np.frombuffer(self._inputs.readable(size), np.uint8, count=size)
        requests = [
            messages.request_from_header(entry, lambda d: read(region, d, copy=False))
            for entry in header["requests"]
        ]
        results = self._instance.execute(requests)
        del requests
        if self._out_of_memory is not None:
            results = [self._memory_error(result) for result in results]
        outputs, end = self._write_outputs(results)
        entries = messages.results_header(results, outputs)
        del results
        reply: dict = {"op": "result", "results": entries, "output_bytes": end}
        fds: list[int] = []
        if _still_referenced(region):
            replacement = TensorRegion.create("edgebox-inputs", self._inputs.size)
            self._inputs.close()
            self._inputs = replacement
            reply["inputs_replaced"] = True
            fds = [replacement.fd]
        self._channel.send(self._with_metrics(reply), fds=fds)

    # -- helpers ---------------------------------------------------------

    def _with_metrics(self, message: dict) -> dict:
        """``message`` with the custom metrics that changed since the last one."""
        try:
            changes = self._metrics.changes()
        except Exception:
            _log.exception("reading the model's custom metrics failed")
            return message
        if changes is not None:
            message["metrics"] = changes
        return message

    def _write_outputs(
        self, results: list[InferResponse | EdgeboxError]
    ) -> tuple[list[list[dict] | None], int]:
        planned = []
        end = 0
        for result in results:
            if isinstance(result, EdgeboxError):
                planned.append(None)
                continue
            descriptors, sources, end = layout(result.outputs, end)
            planned.append((descriptors, sources))
        buffer = self._outputs.writable(end)
        outputs: list[list[dict] | None] = []
        for plan in planned:
            if plan is None:
                outputs.append(None)
                continue
            write(buffer, *plan)
            outputs.append(plan[0])
        return outputs, end

    def _watch_memory_errors(self) -> None:
        """Note a MemoryError from the model's ``execute`` on its way to the
        runner, which turns it into error responses; the process then exits
        after answering, and the daemon starts a fresh one."""
        model = getattr(self._instance, "_model", None)
        execute = getattr(model, "execute", None)
        if execute is None:
            return

        def watched(requests):
            try:
                return execute(requests)
            except MemoryError as exc:
                self._out_of_memory = exc
                raise

        model.execute = watched

    def _memory_error(self, result: InferResponse | EdgeboxError) -> InferResponse | EdgeboxError:
        limit = (
            f"its memory limit of {self._memory_limit_mb} MB"
            if self._memory_limit_mb
            else "the memory available to it"
        )
        detail = str(result) if isinstance(result, EdgeboxError) else "MemoryError"
        return EdgeboxError(
            f"{detail}; the python model process reached {limit} and is being restarted"
        )

    def _context_from(self, header: dict) -> ModelContext:
        config = ModelConfig()
        json_format.ParseDict(header["config"], config)
        return ModelContext(
            name=header["name"],
            version=int(header["version"]),
            config=config,
            model_dir=Path(header["model_dir"]),
            version_dir=Path(header["version_dir"]),
            infer=self._bls.infer if header.get("bls") else None,
        )


def _still_referenced(region: np.ndarray) -> bool:
    """Whether an input array of the request (every one is a view with
    ``region`` as its base) outlived it, held by the model. Arrays caught in
    a reference cycle (an exception's traceback) get one collection to go."""
    # The caller's name, this function's parameter and getrefcount's argument.
    if sys.getrefcount(region) <= _OWN_REFERENCES:
        return False
    gc.collect()
    return sys.getrefcount(region) > _OWN_REFERENCES


def limit_memory(limit_mb: int) -> None:
    """Cap the process's data segment (heap and private writable mappings),
    RLIMIT_DATA, at ``limit_mb``: an allocation past it fails with
    MemoryError. Not RLIMIT_AS: address space that is only reserved (glibc's
    per-thread arenas, CUDA's unified address range) would count too, and a
    cap low enough to matter would stop CUDA from initialising. Shared
    tensor regions do not count either way."""
    if limit_mb > 0:
        limit = limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def exit_with_the_daemon(sock: socket.socket) -> None:
    """Exit at once when the daemon's end of the channel closes (it exited or
    was killed), even while the model is busy in ``execute`` or
    ``finalize``, from a thread of its own."""

    def watch() -> None:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLRDHUP)
        while True:
            for _fd, events in poller.poll():
                if events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                    os._exit(0)

    threading.Thread(target=watch, name="daemon-watch", daemon=True).start()


def _label_log(label: str) -> None:
    """Tag this process's log lines with the model (and, once known, the
    instance) and the pid: they land in the daemon's log."""
    formatter = logging.Formatter(
        f"%(asctime)s %(levelname).1s %(name)s [{label}, pid %(process)d]: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edgebox.backends.python.isolated_child")
    parser.add_argument("--socket-fd", type=int, required=True)
    parser.add_argument("--memory-limit-mb", type=int, default=0)
    parser.add_argument("--label", default="python model")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    # Ctrl-C in a terminal reaches the whole process group; the daemon
    # finalizes its models itself as it shuts down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_memory(args.memory_limit_mb)
    logging.basicConfig(level=args.log_level, stream=sys.stderr)
    _label_log(args.label)
    sock = socket.socket(fileno=args.socket_fd)
    exit_with_the_daemon(sock)
    channel = Channel(sock)
    try:
        return ChildServer(channel, args.memory_limit_mb).serve()
    finally:
        channel.close()


if __name__ == "__main__":
    sys.exit(main())
