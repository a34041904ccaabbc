"""One instance of a model version, loaded through its backend on the CPU
for the length of a ``with`` block, outside any daemon.

``edgebox build-engine`` runs a repository's preprocessing this way to turn
calibration images into engine inputs, and ``edgebox selftest`` runs the
demo pipeline's steps and its ONNX Runtime reference: the same ``model.py``
contract and session options as in the daemon, without starting one. Use
from one thread.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from edgebox.backends.base import Backend, InstanceSpec, ModelContext
from edgebox.errors import EdgeboxError
from edgebox.tensors import InferRequest, InferResponse


class OneInstance:
    """``execute`` runs one request; a backend that cannot load the model
    raises its own error from ``__enter__``, with nothing left loaded."""

    def __init__(
        self,
        backend: Backend,
        context: ModelContext,
        before_load: Callable[[ModelContext], None] | None = None,
    ) -> None:
        """``before_load`` sees the config as the backend completed it and may
        refuse it (raise) before any instance starts."""
        self._backend = backend
        self.context = context
        self._before_load = before_load
        self._instance = None

    def __enter__(self) -> OneInstance:
        self._backend.complete_config(self.context)
        try:
            if self._before_load is not None:
                self._before_load(self.context)
            self._instance = self._backend.load_instance(
                self.context, InstanceSpec(f"{self.context.name}_0", "CPU")
            )
        except BaseException:
            self._backend.unload(self.context)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._instance is not None:
            self._instance.close()
            self._instance = None
        self._backend.unload(self.context)

    def execute(self, request: InferRequest) -> InferResponse | EdgeboxError:
        assert self._instance is not None, "use inside 'with'"
        return self._instance.execute([request])[0]
