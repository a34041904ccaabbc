"""The ``onnxruntime_onnx`` backend: one session per instance.

Auto-complete needs a session to read the model's inputs and outputs; that
probe session, made on the CPU, becomes the first instance's when its
providers are the same, so a CPU model is loaded once, not twice.
"""

from __future__ import annotations

from edgebox.backends import base
from edgebox.backends.onnxruntime.autocomplete import complete_and_check
from edgebox.backends.onnxruntime.instance import OnnxInstance
from edgebox.backends.onnxruntime.providers import providers_for
from edgebox.backends.onnxruntime.session_options import session_options
from edgebox.errors import Unavailable, one_line


def _import_onnxruntime():
    try:
        import onnxruntime
    except ImportError as exc:
        raise Unavailable(
            f"ONNX Runtime is not installed ({exc}); install 'onnxruntime' "
            "(or NVIDIA's onnxruntime-gpu wheel on a Jetson)"
        ) from None
    return onnxruntime


class Backend(base.Backend):
    name = "onnxruntime"

    def __init__(self) -> None:
        self._probe_sessions: dict[tuple[str, int], object] = {}

    def complete_config(self, context: base.ModelContext) -> None:
        ort = _import_onnxruntime()
        model_path = context.model_file()
        session = self._create_session(ort, context, model_path, "CPU", 0)
        self._probe_sessions[(context.name, context.version)] = session
        complete_and_check(context, session, model_path)

    def load_instance(
        self, context: base.ModelContext, instance: base.InstanceSpec
    ) -> OnnxInstance:
        ort = _import_onnxruntime()
        providers = providers_for(ort, context, instance)
        probe = self._probe_sessions.pop((context.name, context.version), None)
        if probe is not None and probe.get_providers() == [
            p if isinstance(p, str) else p[0] for p in providers
        ]:
            session = probe
        else:
            session = self._create_session(
                ort, context, context.model_file(), instance.kind, instance.device_id
            )
        return OnnxInstance(context, session)

    def unload(self, context: base.ModelContext) -> None:
        self._probe_sessions.pop((context.name, context.version), None)

    def _create_session(
        self, ort, context: base.ModelContext, model_path, kind: str, device_id: int
    ):
        options = session_options(ort, context)
        providers = providers_for(ort, context, base.InstanceSpec("probe", kind, device_id))
        try:
            return ort.InferenceSession(str(model_path), sess_options=options, providers=providers)
        except Exception as exc:
            raise Unavailable(
                f"{context.where}: ONNX Runtime cannot load '{model_path}': {one_line(exc)}"
            ) from None
