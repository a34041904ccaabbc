"""TensorRT engines (``platform: "tensorrt_plan"``).

TensorRT comes from JetPack, not from PyPI, so it is imported only when a
TensorRT model loads; without it the model is UNAVAILABLE with the import error
as its reason and every other model keeps serving. Engine execution on the GPU
and DLA is the subject of its own piece of work; until it lands, a machine
that does have TensorRT gets a reason that says so, never a silent failure.
"""

from __future__ import annotations

from edgebox.backends import base
from edgebox.errors import Unavailable, Unsupported


def _import_tensorrt():
    try:
        import tensorrt
    except ImportError as exc:
        raise Unavailable(
            f"TensorRT is not installed ({exc}); on a Jetson it comes with JetPack "
            "(python3-libnvinfer)"
        ) from None
    return tensorrt


class Backend(base.Backend):
    name = "tensorrt"

    def complete_config(self, context: base.ModelContext) -> None:
        context.model_file()
        tensorrt = _import_tensorrt()
        raise Unsupported(
            f"{context.where}: TensorRT {tensorrt.__version__} is installed, but this edgebox "
            "version does not execute TensorRT engines yet; serve the ONNX model with "
            'platform: "onnxruntime_onnx" meanwhile'
        )

    def load_instance(self, context: base.ModelContext, instance: base.InstanceSpec):
        self.complete_config(context)
