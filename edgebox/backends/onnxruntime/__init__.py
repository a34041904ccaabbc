"""ONNX Runtime sessions for ``platform: "onnxruntime_onnx"``, as Triton's
onnxruntime backend runs them: one session per instance.

GPU instances use the CUDA execution provider (and TensorRT's, when the config
asks for it) where this onnxruntime build has them, and otherwise run on the
CPU with a note on the model rather than failing, so a repository written for
an Orin still serves on a dev machine (``providers``). The config's
``parameters`` become session options (``session_options``); auto-complete
fills and checks the config against the model file (``autocomplete``).

Invariant: ``onnxruntime`` is imported when an ONNX model loads, never at
import time, so a machine without it loses only its ONNX models; and nothing
a config says reaches ONNX Runtime unchecked (thread counts against
``max_threads_per_instance``, session entries and cache folders against
``repository/backend_parameters.py``, custom-op libraries against the model
folder, ``custom_ops``).
Spec: https://github.com/triton-inference-server/onnxruntime_backend
"""

from edgebox.backends.onnxruntime.backend import Backend

__all__ = ["Backend"]
