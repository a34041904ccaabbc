"""Which execution providers an instance's session gets.

CPU instances get the CPU provider. GPU instances get CUDA's, preceded by
TensorRT's when the config lists it under
``optimization.execution_accelerators`` (its options checked by
``repository/backend_parameters.py``, cache folders kept inside the model
folder), where this onnxruntime build has them; a build without CUDA runs GPU
instances on the CPU, and the model's notes say so.
"""

from __future__ import annotations

import logging
from types import ModuleType

from edgebox.backends import base
from edgebox.errors import InvalidArgument
from edgebox.repository.backend_parameters import (
    TENSORRT_EP_CACHE_PATHS,
    tensorrt_accelerator_problems,
)
from edgebox.repository.contained_path import resolve_inside

log = logging.getLogger("edgebox.backends.onnxruntime")


def providers_for(
    ort: ModuleType, context: base.ModelContext, instance: base.InstanceSpec
) -> list[str | tuple[str, dict]]:
    """The providers for one instance's session, most preferred first, as
    ``InferenceSession(providers=...)`` takes them: a name, or a name and its
    options. A GPU instance's note is added to ``context.notes`` once."""
    available = set(ort.get_available_providers())
    if instance.kind != "GPU":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in available:
        note = "CUDA execution provider not in this onnxruntime build; running on the CPU"
        if note not in context.notes:
            context.notes.append(note)
            log.warning("%s: %s", context.where, note)
        return ["CPUExecutionProvider"]
    providers: list = []
    accelerators = context.config.optimization.execution_accelerators.gpu_execution_accelerator
    for accelerator in accelerators:
        if accelerator.name == "tensorrt" and "TensorrtExecutionProvider" in available:
            given = dict(accelerator.parameters)
            problems = tensorrt_accelerator_problems(given)
            if problems:
                raise InvalidArgument(
                    f"{context.where}: execution accelerator 'tensorrt': {problems[0]}"
                )
            options = {"device_id": instance.device_id}
            for key, value in given.items():
                if key == "precision_mode":
                    options["trt_fp16_enable"] = value.upper() == "FP16"
                    options["trt_int8_enable"] = value.upper() == "INT8"
                elif key == "max_workspace_size_bytes":
                    options["trt_max_workspace_size"] = int(value)
                elif key in TENSORRT_EP_CACHE_PATHS:
                    # ONNX Runtime creates the folder and writes engines into it.
                    options[key] = str(
                        resolve_inside(
                            context.model_dir,
                            value,
                            f"accelerator parameter '{key}'",
                            context.where,
                        )
                    )
                else:
                    options[key] = value
            providers.append(("TensorrtExecutionProvider", options))
    providers.append(("CUDAExecutionProvider", {"device_id": instance.device_id}))
    providers.append("CPUExecutionProvider")
    return providers
