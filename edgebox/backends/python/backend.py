"""The python backend: ``backend: "python"`` models, each run in the process
its isolation mode names (``isolation.py``): in the daemon by ``runner.py``,
or in a process of its own by ``isolated.py``.
"""

from __future__ import annotations

from edgebox.backends import base
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import runner
from edgebox.backends.python.isolated import IsolatedBackend
from edgebox.backends.python.isolation import (
    ISOLATION_PARAMETER,
    MEMORY_LIMIT_PARAMETER,
    PROCESS,
    Isolation,
    IsolationOptions,
    isolation_of,
)


class Backend(base.Backend):
    """Runs ``backend: "python"`` models, each in the process its isolation
    mode names. Same rules as ``runner.Backend``: one ``ModelContext`` object
    per loaded version, handed to every call for it."""

    name = "python"

    def __init__(self, options: IsolationOptions | None = None) -> None:
        self.options = options or IsolationOptions()
        self._in_process = runner.Backend()
        self._isolated = IsolatedBackend(self.options)

    def complete_config(self, context: ModelContext) -> None:
        isolation = isolation_of(context, self.options)
        if isolation.mode == PROCESS:
            limit = f"{isolation.memory_limit_mb} MB" if isolation.memory_limit_mb else "none"
            context.notes.append(f"runs in its own process (memory limit: {limit})")
        elif MEMORY_LIMIT_PARAMETER in context.config.parameters:
            context.notes.append(
                f"{MEMORY_LIMIT_PARAMETER} ignored: it applies with {ISOLATION_PARAMETER} "
                f"'{PROCESS}' only"
            )
        self._pick(isolation).complete_config(context)

    def load_instance(self, context: ModelContext, instance: InstanceSpec) -> base.Instance:
        return self._pick(isolation_of(context, self.options)).load_instance(context, instance)

    def unload(self, context: ModelContext) -> None:
        # Both: unload also follows a complete_config that failed on a bad mode.
        self._in_process.unload(context)
        self._isolated.unload(context)

    def _pick(self, isolation: Isolation) -> base.Backend:
        return self._isolated if isolation.mode == PROCESS else self._in_process
