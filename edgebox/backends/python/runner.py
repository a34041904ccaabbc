"""The in-process python backend: runs a Triton ``model.py`` in the
daemon's interpreter (``EDGEBOX_ISOLATION: in_process``, the default).

``model_import`` brings the model's module in and out, ``instance`` drives
its objects. Here: the load order Triton follows (import, then
``auto_complete_config``, then per instance ``TritonPythonModel()`` and
``initialize(args)`` with Triton's arguments), and the completed config's
way back into the version's ``ModelContext``.
Spec: https://github.com/triton-inference-server/python_backend#usage
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from edgebox.backends import base
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import triton_python_backend_utils as pb_utils
from edgebox.backends.python.instance import PythonInstance
from edgebox.backends.python.model_import import (
    MODEL_CLASS_NAME,
    ImportedModel,
    describe_exception,
    import_model,
    load_failure,
    unimport,
)
from edgebox.errors import Unavailable
from edgebox.repository.config import ModelConfig, config_to_dict
from edgebox.repository.config_rules import check_model_config


class Backend(base.Backend):
    """Runs ``backend: "python"`` models. ``complete_config``, ``load_instance``
    and ``unload`` must be handed the same ``ModelContext`` object for one
    loaded version; two loads of the same (model, version), as during a reload,
    stay apart."""

    name = "python"

    def __init__(self) -> None:
        self._loaded: dict[int, ImportedModel] = {}
        self._lock = threading.Lock()

    def complete_config(self, context: ModelContext) -> None:
        loaded = self._import(context)
        try:
            auto_complete = getattr(loaded.model_class, "auto_complete_config", None)
            if auto_complete is not None:
                _auto_complete(context, auto_complete)
        except BaseException:
            self.unload(context)
            raise

    def load_instance(self, context: ModelContext, instance: InstanceSpec) -> PythonInstance:
        with self._lock:
            loaded = self._loaded.get(id(context))
        if loaded is None:
            loaded = self._import(context)
        where = context.where
        version_dir = Path(context.version_dir)
        try:
            model = loaded.model_class()
        except BaseException as exc:
            raise load_failure(
                f"{where}: {MODEL_CLASS_NAME}() raised {describe_exception(exc, version_dir)}", exc
            ) from None
        initialize = getattr(model, "initialize", None)
        if initialize is not None:
            args = {
                "model_config": json.dumps(config_to_dict(context.config)),
                "model_instance_kind": instance.kind,
                "model_instance_name": instance.name,
                "model_instance_device_id": str(instance.device_id),
                "model_repository": str(context.model_dir),
                "model_version": str(context.version),
                "model_name": context.name,
            }
            try:
                initialize(args)
            except BaseException as exc:
                raise load_failure(
                    f"{where}: initialize() raised {describe_exception(exc, version_dir)}", exc
                ) from None
        return PythonInstance(context, model)

    def unload(self, context: ModelContext) -> None:
        with self._lock:
            loaded = self._loaded.pop(id(context), None)
            # Another load of the same folder (a reload) keeps its model module.
            still_loaded = {other.module.__name__ for other in self._loaded.values()}
        if loaded is not None:
            unimport(loaded, keep=still_loaded)

    def _import(self, context: ModelContext) -> ImportedModel:
        if context.infer is not None:
            pb_utils._bind_infer_function(context.infer)
        if context.infer_stream is not None:
            pb_utils._bind_infer_stream_function(context.infer_stream)
        path = context.model_file()
        loaded = import_model(context, path)
        with self._lock:
            previous = self._loaded.get(id(context))
            self._loaded[id(context)] = loaded
        if previous is not None:
            # A second complete_config for the same context: keep only the new import.
            unimport(previous)
        return loaded


def _auto_complete(context: ModelContext, auto_complete: Any) -> None:
    """Triton's auto-complete: the model may fill max_batch_size, inputs,
    outputs, dynamic batching and the transaction policy. The result replaces
    ``context.config`` in place, so holders of the message see it."""
    where = context.where
    version_dir = Path(context.version_dir)
    given = pb_utils.ModelConfig(config_to_dict(context.config))
    try:
        result = auto_complete(given)
    except BaseException as exc:
        raise load_failure(
            f"{where}: auto_complete_config() raised {describe_exception(exc, version_dir)}", exc
        ) from None
    if not isinstance(result, pb_utils.ModelConfig):
        raise Unavailable(
            f"{where}: auto_complete_config() returned {type(result).__name__}, expected "
            "the pb_utils.ModelConfig it was given"
        )
    adopt_completed_config(context, result.as_dict())


def adopt_completed_config(context: ModelContext, completed_config: dict) -> None:
    """Replace ``context.config`` in place with what ``auto_complete_config()``
    produced (its dict form), once it passes the checks a config file gets.
    Also how an isolated model's completion, made in its own process, comes in."""
    where = context.where
    completed = ModelConfig()
    try:
        json_format.ParseDict(completed_config, completed, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise Unavailable(
            f"{where}: auto_complete_config() produced an invalid config: {exc}"
        ) from None
    problems = check_model_config(completed)
    if problems:
        field_path, message = problems[0]
        raise Unavailable(
            f"{where}: config after auto_complete_config() is invalid at '{field_path}': {message}"
        )
    context.config.CopyFrom(completed)
