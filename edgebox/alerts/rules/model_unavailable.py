"""``model_unavailable``: a model version that failed to load or to keep
serving (state UNAVAILABLE), or a model whose config cannot be read.

A version retired on purpose (unloaded, left out by its version policy)
also ends UNAVAILABLE, as in Triton, but only after UNLOADING: that path is
no alert. The alert clears when the version is READY, is unloaded, or its
folder is removed; a LOADING retry keeps it until the retry succeeds.

Two ways out publish no event: the model's folder removed, and a model-level
status (a config that could not be read) dropped once the config reads
again. ``has_status`` (the registry's) catches those at each judgement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.rules.base import Inputs, remember
from edgebox.events import ModelStateChanged


def subject_of(event: ModelStateChanged) -> str:
    return event.model if event.version is None else f"{event.model}:{event.version}"


class ModelUnavailableRule:
    name: ClassVar[str] = "model_unavailable"
    EVENTS: ClassVar[tuple[type, ...]] = (ModelStateChanged,)

    def __init__(self, has_status: Callable[[str, int | None], bool] | None = None) -> None:
        """``has_status(model, version)``: whether the registry still holds a
        status for it; None: trust the events alone."""
        self._has_status = has_status
        self._failed: dict[str, ModelStateChanged] = {}
        self._unloading: dict[str, None] = {}

    def observe(self, event: Any, now: float) -> None:
        if not isinstance(event, ModelStateChanged):
            return
        subject = subject_of(event)
        if event.state == "UNAVAILABLE":
            if subject in self._unloading:
                self._unloading.pop(subject)
            else:
                remember(self._failed, subject, event)
            return
        if event.state == "LOADING":
            return
        self._failed.pop(subject, None)
        if event.state == "UNLOADING":
            remember(self._unloading, subject, None)
        else:
            self._unloading.pop(subject, None)

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        if self._has_status is not None:
            gone = [s for s, e in self._failed.items() if not self._has_status(e.model, e.version)]
            for subject in gone:
                del self._failed[subject]
        found = {}
        for subject, event in self._failed.items():
            what = f"model '{event.model}'"
            if event.version is not None:
                what += f" version {event.version}"
            reason = f": {event.reason}" if event.reason else ""
            found[subject] = Finding("critical", f"{what} is UNAVAILABLE{reason}")
        return found
