"""The contract between edgebox and a backend.

A backend turns a version folder into instances. An ``Instance`` runs a list of
requests and returns one result per request, in order: a response, or the
EdgeboxError that request failed with. Raising from ``execute`` fails every
request of the call; the daemon keeps running either way. The scheduler turns
that list into one final send per request on the request's response sink
(``edgebox/responses.py``): unary inference is the sink contract's special case.

A decoupled model's instance (``model_transaction_policy { decoupled: true }``,
python models only) has ``execute_decoupled(requests, sinks)`` besides, which
the decoupled scheduler calls instead, as python_backend runs such a model:
each request gets its own sink, the model's ``request.get_response_sender()``.
The instance sends zero or more responses, then exactly one final
(``send(None, final=True)`` when it has no last response), from
``execute_decoupled`` or from a thread it started, after that returned; it
reports a request's failure as an error sent, and a send after the final raises
``ResponseContractError`` back at the model. The sinks are the scheduler's: they
put each response into client shapes and count it before passing it on.
Returning ends the call, not the requests: the instance takes the next batch
while earlier requests may still be sending. Raising fails every request of the
call that has not sent its final yet. A request without its final when the
instance is closed (a drain that timed out) gets one from ``close``, so no sink
waits for ever.

``execute`` gets one request, or a dynamic batch: requests that share input
names, datatypes and shapes apart from the batch dimension, whose batch sizes
add up to at most ``max_batch_size``. It may assume they were validated against
the model's config and reshaped to the model's shapes, and that no other thread
is inside ``execute`` of the same instance: each instance serves one caller or
one batcher worker at a time. Which thread that is varies,
so an instance that needs thread affinity (a CUDA context) keeps its own thread.

Tensors change hands, they are not copied. The arrays ``execute`` returns
belong to their responses from then on: the instance goes back to the pool
while the response is still being encoded and sent, so it must never write
them again. ONNX Runtime and TensorRT return fresh arrays from every run; the
python backend copies any output its model may still hold. Input arrays are
the caller's, and a read-only one is also read by someone else (an ensemble's
other steps): an instance never writes into its inputs, and one that runs
code which may (a python model) hands that code a copy of the read-only ones.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from edgebox.errors import EdgeboxError
from edgebox.repository.contained_path import model_file_inside
from edgebox.responses import ResponseSink
from edgebox.tensors import InferRequest, InferResponse

InferFunction = Callable[[InferRequest], InferResponse]
"""Runs a request against any loaded model; how BLS calls reach other models."""
InferStreamFunction = Callable[[InferRequest, ResponseSink], None]
"""Runs a request against any loaded model, its responses to the sink
(``DataPlane.infer_stream``); how BLS ``exec(decoupled=True)`` calls reach them."""


@dataclass(frozen=True)
class InstanceSpec:
    """One instance to create, from an ``instance_group`` entry."""

    name: str
    """Triton's naming: ``<group name>_<index>``, e.g. ``add_sub_0_1``."""
    kind: str
    """``CPU``, ``GPU`` or ``MODEL`` (KIND_AUTO is resolved before this point)."""
    device_id: int = 0
    secondary_devices: tuple[tuple[str, int], ...] = ()
    """(kind, device_id) pairs, e.g. ``("KIND_NVDLA", 0)`` for a DLA core."""
    resources: tuple[tuple[str, int, bool], ...] = ()
    """The group's ``rate_limiter`` resources as (name, count, global)."""
    priority: int = 0
    """The group's ``rate_limiter`` priority (0 counts as 1)."""


@dataclass
class ModelContext:
    """Everything a backend may know about the version it loads."""

    name: str
    version: int
    config: object
    """The normalized, auto-completed ``ModelConfig``."""
    model_dir: Path
    version_dir: Path
    infer: InferFunction | None = None
    infer_stream: InferStreamFunction | None = None
    notes: list[str] = field(default_factory=list)
    """Facts the backend wants shown with the model (e.g. "CUDA EP absent, running on CPU")."""
    max_threads_per_instance: int | None = None
    """The daemon's ``max_threads_per_instance``: a config asking one instance
    for more threads is refused, never clamped. None: no limit (tools, tests)."""
    health: Callable[[bool, str], None] | None = None
    """Set by lifecycle (its VersionLoader) once the version is built. A backend whose
    instances can fail and recover while loaded (an isolated python model's
    process) calls ``health(ready, reason)`` from its own thread: ready False
    while no instance can serve, a reason while any cannot, ``(True, "")``
    once all can again. The version's state and reason show it."""

    @property
    def where(self) -> str:
        return f"model '{self.name}' version {self.version}"

    def model_file(self) -> Path:
        """The version's model file, kept inside the model folder after
        symlinks (InvalidArgument when it leads out); Unavailable when it is
        missing. Every backend finds its file here."""
        return model_file_inside(
            Path(self.model_dir),
            Path(self.version_dir),
            self.config.default_model_filename,
            self.where,
        )


class Instance(Protocol):
    def execute(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]: ...

    def close(self) -> None:
        """Release what the instance holds; called once, after its last execute."""


class Backend(abc.ABC):
    """One per platform, created once by the catalog and shared by every model
    of that platform; each platform's package exposes one as ``Backend``."""

    name: str = ""

    def complete_config(self, context: ModelContext) -> None:  # noqa: B027
        """Fill what the config leaves out from the model file (Triton's
        auto-complete) and check the rest against it; raise EdgeboxError on a
        mismatch, naming the config and the model file."""

    @abc.abstractmethod
    def load_instance(self, context: ModelContext, instance: InstanceSpec) -> Instance:
        """Create one instance; raise EdgeboxError (usually Unavailable) with a
        reason when it cannot be created."""

    def unload(self, context: ModelContext) -> None:  # noqa: B027
        """Called after every instance of a version is closed."""
