"""Python models in a process of their own (``EDGEBOX_ISOLATION: process``),
as Triton runs every python model in a stub process.

Each instance gets one child process (``isolated_child.py``) that imports the
model's ``model.py`` (the same file the in-process runner resolves) and runs
its ``initialize``/``execute``/``finalize``; tensors pass through shared
memory (``model_process.py``). What isolation buys: ``os._exit()``, a
segfault or a memory blow-up in the model ends only its process, a model that
holds the GIL stalls only itself, and a leak is capped per process
(``EDGEBOX_MEMORY_LIMIT_MB``, as RLIMIT_DATA).

When a process ends while loaded:

* the requests it was running answer INTERNAL (500), naming how it ended
  (``... python model process exited with signal SIGSEGV during execute() ...``);
* while it is down, its instance answers UNAVAILABLE (503) at once, and the
  version's state says why (UNAVAILABLE when no instance of it is left, READY
  with the reason while others still serve);
* a supervisor thread restarts it after an exponential backoff, with
  ``initialize`` run again; a restart that fails is retried the same way.

There is no execute timeout: a hung model holds its own instance (and its
callers) only, as under Triton; unloading it kills the process after
``finalize_timeout_s``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from edgebox.backends import base
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python.isolation import IsolationOptions, isolation_of
from edgebox.backends.python.model_process import EXIT_WAIT_S, ModelProcess, ProcessExited
from edgebox.backends.python.runner import adopt_completed_config
from edgebox.errors import EdgeboxError, Unavailable, Unsupported
from edgebox.tensors import InferRequest, InferResponse

_log = logging.getLogger("edgebox.backends.python.isolated")


class IsolatedBackend(base.Backend):
    """Loads isolated python models. The process that ran a version's
    ``auto_complete_config`` is kept and becomes its first instance's, so a
    model is imported once per instance, not once more for the config."""

    name = "python"

    def __init__(self, options: IsolationOptions) -> None:
        self._options = options
        self._lock = threading.Lock()
        self._spare: dict[int, ModelProcess] = {}
        self._health: dict[int, VersionHealth] = {}

    def complete_config(self, context: ModelContext) -> None:
        process = self._start(context, f"model '{context.name}' version {context.version}")
        try:
            completed = process.complete_config(context)
            adopt_completed_config(context, completed)
            if context.config.model_transaction_policy.decoupled:
                raise Unsupported(
                    f"{context.where}: a decoupled model cannot run isolated (EDGEBOX_ISOLATION "
                    "'process'): its response sender exists in the daemon's process only; "
                    "run it 'in_process'"
                )
        except ProcessExited:
            code = process.wait(EXIT_WAIT_S)
            process.release()
            raise Unavailable(
                f"{context.where}: python model process {process.describe_exit(code)} while "
                "loading model.py"
            ) from None
        except BaseException:
            process.stop(0)
            raise
        with self._lock:
            previous = self._spare.pop(id(context), None)
            self._spare[id(context)] = process
        if previous is not None:
            previous.stop(0)

    def load_instance(self, context: ModelContext, instance: InstanceSpec) -> IsolatedInstance:
        with self._lock:
            process = self._spare.pop(id(context), None)
            health = self._health.setdefault(id(context), VersionHealth(context))
        if process is None:
            process = self._start(context, _label(context, instance))
        _initialize(process, context, instance)
        isolated = IsolatedInstance(context, instance, process, self._options, health, self._start)
        health.add(instance.name)
        return isolated

    def unload(self, context: ModelContext) -> None:
        with self._lock:
            process = self._spare.pop(id(context), None)
            self._health.pop(id(context), None)
        if process is not None:
            process.stop(0)

    def _start(self, context: ModelContext, label: str) -> ModelProcess:
        limit = isolation_of(context, self._options).memory_limit_mb
        return ModelProcess.start(label, limit)


def _initialize(process: ModelProcess, context: ModelContext, instance: InstanceSpec) -> None:
    """Run the instance's ``initialize`` in ``process``; on failure the process
    is stopped and the load error raised."""
    try:
        process.initialize(context, instance)
    except ProcessExited:
        code = process.wait(EXIT_WAIT_S)
        process.release()
        raise Unavailable(
            f"{context.where}: python model process {process.describe_exit(code)} while "
            f"loading instance '{instance.name}'"
        ) from None
    except BaseException:
        process.stop(0)
        raise


class IsolatedInstance:
    """One instance and its process. ``execute`` is called by one thread at a
    time (the instance pool's promise); a supervisor thread of its own waits
    for the process to end and restarts it."""

    def __init__(
        self,
        context: ModelContext,
        instance: InstanceSpec,
        process: ModelProcess,
        options: IsolationOptions,
        health: VersionHealth,
        start: Callable[[ModelContext, str], ModelProcess],
    ) -> None:
        self._context = context
        self._instance = instance
        self._where = context.where
        self._name = instance.name
        self._options = options
        self._health = health
        self._start = start
        self._lock = threading.Lock()
        """Guards ``_process``, ``_down`` and ``_starting``."""
        self._busy = threading.Lock()
        """Held while a request uses the process, so the supervisor swaps it
        only between requests."""
        self._process: ModelProcess | None = process
        self._starting: ModelProcess | None = None
        self._down = ""
        """How the last process ended, while there is none (``exited with code 3``)."""
        self._closing = threading.Event()
        self._supervisor = threading.Thread(
            target=self._supervise, name=f"python-process-{instance.name}", daemon=True
        )
        self._supervisor.start()

    @property
    def pid(self) -> int | None:
        """The process's id while there is one (tests and logs)."""
        with self._lock:
            return None if self._process is None else self._process.pid

    def execute(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        with self._busy:
            with self._lock:
                process, down = self._process, self._down
            if process is None or process.poll() is not None:
                error = Unavailable(
                    f"{self._where}: the python model process of instance '{self._name}' "
                    f"{down or 'has exited'} and is being restarted; retry later"
                )
                return [error for _ in requests]
            try:
                return process.execute(requests, self._context.infer)
            except ProcessExited:
                code = process.wait(EXIT_WAIT_S)
                message = (
                    f"{self._where}: python model process {process.describe_exit(code)} during "
                    f"execute() (instance '{self._name}', pid {process.pid}); it is being "
                    "restarted"
                )
                _log.error("%s", message)
                return [EdgeboxError(message) for _ in requests]

    def close(self) -> None:
        """Finalize and stop the process (killed after the finalize timeout),
        stop restarting it; returns once the process is reaped."""
        if self._closing.is_set():
            return
        self._closing.set()
        with self._lock:
            process, self._process = self._process, None
            starting = self._starting
        if starting is not None:
            starting.kill()
        if process is not None:
            process.stop(self._options.finalize_timeout_s)
        self._supervisor.join(self._options.finalize_timeout_s + EXIT_WAIT_S)

    def _supervise(self) -> None:
        backoff = self._options.restart_backoff
        attempt = 0
        while True:
            with self._lock:
                process = self._process
            if process is None:
                return
            started = time.monotonic()
            code = process.wait()
            if self._closing.is_set():
                return
            if time.monotonic() - started >= backoff.max_s:
                attempt = 0
            ended = process.describe_exit(code)
            _log.error(
                "%s, instance '%s': python model process %s (pid %d); restarting it",
                self._where,
                self._name,
                ended,
                process.pid,
            )
            with self._busy, self._lock:
                if self._closing.is_set():
                    return
                self._process = None
                self._down = ended
            process.release()
            if not self._restart(f"python model process {ended}", attempt):
                return
            attempt += 1

    def _restart(self, reason: str, attempt: int) -> bool:
        """Start and initialize a new process, after a backoff, until one
        works; False once the instance is closing."""
        backoff = self._options.restart_backoff
        state = reason
        while True:
            delay = backoff.delay_s(attempt)
            self._health.down(self._name, f"{state}; restarting in {delay:g} s")
            if self._closing.wait(delay):
                return False
            try:
                process = self._start(self._context, _label(self._context, self._instance))
            except Exception as err:
                state = f"{reason}; restart failed: {_failure(err)}"
                _log.error("%s, instance '%s': %s", self._where, self._name, state)
                attempt += 1
                continue
            with self._lock:
                if self._closing.is_set():
                    process.stop(0)
                    return False
                self._starting = process
            try:
                _initialize(process, self._context, self._instance)
            except Exception as err:
                with self._lock:
                    self._starting = None
                if self._closing.is_set():
                    return False
                state = f"{reason}; restart failed: {_failure(err)}"
                _log.error("%s, instance '%s': %s", self._where, self._name, state)
                attempt += 1
                continue
            with self._lock:
                self._starting = None
                if self._closing.is_set():
                    process.stop(0)
                    return False
                self._process = process
                self._down = ""
            _log.info(
                "%s, instance '%s': python model process restarted (pid %d)",
                self._where,
                self._name,
                process.pid,
            )
            self._health.up(self._name)
            return True


class VersionHealth:
    """Which instances of one loaded version are without a process, told to
    the lifecycle manager through ``ModelContext.health``. Thread-safe."""

    def __init__(self, context: ModelContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._instances: set[str] = set()
        self._down: dict[str, str] = {}

    def add(self, instance: str) -> None:
        with self._lock:
            self._instances.add(instance)

    def down(self, instance: str, reason: str) -> None:
        with self._lock:
            self._down[instance] = reason
            self._report()

    def up(self, instance: str) -> None:
        with self._lock:
            self._down.pop(instance, None)
            self._report()

    def _report(self) -> None:
        report = self._context.health
        if report is None:
            return
        ready = len(self._down) < len(self._instances)
        reason = "; ".join(f"instance '{name}': {why}" for name, why in sorted(self._down.items()))
        try:
            report(ready, reason)
        except Exception:
            _log.exception("%s: reporting instance health failed", self._context.where)


def _failure(error: Exception) -> str:
    """A restart's failure as its state shows it; an unexpected one by type."""
    return str(error) if isinstance(error, EdgeboxError) else f"{type(error).__name__}: {error}"


def _label(context: ModelContext, instance: InstanceSpec) -> str:
    return f"model '{context.name}' version {context.version} instance '{instance.name}'"
