"""Which process a python model runs in, per model: the daemon's own
(``in_process``, the default) or a child process of its own (``process``).

A model picks with a ``parameters`` entry in its ``config.pbtxt``; models that
do not say get the daemon's ``python_isolation`` setting::

    parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }
    parameters { key: "EDGEBOX_MEMORY_LIMIT_MB" value: { string_value: "512" } }

``EDGEBOX_MEMORY_LIMIT_MB`` caps an isolated model's process (0: no cap);
without it the daemon's ``python_memory_limit_mb`` applies. docs/python_models.md
says when to choose which, with measured costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgebox.backends.base import ModelContext
from edgebox.backoff import Backoff
from edgebox.errors import InvalidArgument

ISOLATION_PARAMETER = "EDGEBOX_ISOLATION"
MEMORY_LIMIT_PARAMETER = "EDGEBOX_MEMORY_LIMIT_MB"
IN_PROCESS = "in_process"
PROCESS = "process"
MODES = (IN_PROCESS, PROCESS)
DEFAULT_MEMORY_LIMIT_MB = 2048


@dataclass(frozen=True)
class IsolationOptions:
    """The daemon-wide defaults, and how isolated processes are supervised."""

    mode: str = IN_PROCESS
    """For models whose config does not name one (setting ``python_isolation``)."""
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    """Per isolated process, unless its config says (``python_memory_limit_mb``); 0: none."""
    restart_backoff: Backoff = field(default_factory=lambda: Backoff(initial_s=0.5, max_s=30.0))
    """Wait before each restart of a process that ended; the count starts over
    once a process has run for ``max_s``."""
    finalize_timeout_s: float = 5.0
    """How long ``finalize()`` may run at unload before the process is killed."""


@dataclass(frozen=True)
class Isolation:
    """What one model gets."""

    mode: str
    memory_limit_mb: int


def isolation_of(context: ModelContext, options: IsolationOptions) -> Isolation:
    """The model's choice, or the daemon's; InvalidArgument names the
    parameter and what it accepts."""
    parameters = context.config.parameters
    mode = options.mode
    if ISOLATION_PARAMETER in parameters:
        mode = parameters[ISOLATION_PARAMETER].string_value
        if mode not in MODES:
            accepted = " or ".join(f"'{m}'" for m in MODES)
            raise InvalidArgument(
                f"{context.where}, parameter '{ISOLATION_PARAMETER}': expected {accepted}, "
                f"got '{mode}'"
            )
    limit = options.memory_limit_mb
    if MEMORY_LIMIT_PARAMETER in parameters:
        text = parameters[MEMORY_LIMIT_PARAMETER].string_value
        if not text.strip().isdigit():
            raise InvalidArgument(
                f"{context.where}, parameter '{MEMORY_LIMIT_PARAMETER}': expected a whole "
                f"number of MB (0: no limit), got '{text}'"
            )
        limit = int(text)
    return Isolation(mode, limit)
