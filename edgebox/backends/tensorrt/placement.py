"""Where an engine's layers run, from TensorRT's engine inspector.

When an engine is built for a DLA core with GPU fallback allowed, TensorRT
moves every layer the DLA cannot run to the GPU without a word, so an engine
"for the DLA" may run mostly on the GPU. The inspector's JSON
(``get_engine_information(LayerInformationFormat.JSON)``) lists the engine's
layers: plain names when the engine was built with the default
``ProfilingVerbosity.LAYER_NAMES_ONLY``, objects with ``Name`` and
``LayerType`` with ``DETAILED``, nothing with ``NONE``.

How a layer is classified, for an engine deserialized for a DLA core:
- a DLA subgraph is one engine layer named ``{ForeignNode[first...last]}``
  (``LayerType`` mentions DLA in detailed output); a ForeignNode whose type is
  ``Myelin`` is a GPU graph and counts as GPU;
- the copies TensorRT adds around a DLA subgraph (``... to nvm``,
  ``... from nvm``, ``... copy finish``) are transfers, counted as neither;
- everything else runs on the GPU: that is the fallback.
Layers of profiles other than the first repeat with a ``[profile N]`` suffix
and are counted once. Counts are engine layers (fused), not ONNX nodes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_OTHER_PROFILE = re.compile(r"\[profile \d+\]")
_TRANSFER_SUFFIXES = (" to nvm", " from nvm", " copy finish")
_NAMES_SHOWN = 5


@dataclass(frozen=True)
class Placement:
    dla_core: int | None
    dla_layers: tuple[str, ...] = ()
    gpu_layers: tuple[str, ...] = ()
    unknown_reason: str = ""

    def summary(self) -> str:
        if self.unknown_reason:
            return f"layer placement unknown: {self.unknown_reason}"
        if self.dla_core is None:
            return f"layer placement: GPU: {_count(self.gpu_layers)}"
        if self.gpu_layers:
            fallback = f"{_count(self.gpu_layers)} ({_names(self.gpu_layers)})"
        else:
            fallback = "none"
        return (
            f"layer placement: DLA core {self.dla_core}: {_count(self.dla_layers)}; "
            f"GPU fallback: {fallback}"
        )


def summarize_placement(engine_information: str, dla_core: int | None) -> Placement:
    """Classify the layers in the inspector's JSON for an engine deserialized
    for ``dla_core`` (None: GPU only)."""
    try:
        document = json.loads(engine_information or "{}")
    except json.JSONDecodeError as exc:
        return Placement(dla_core, unknown_reason=f"the engine inspector's JSON is invalid ({exc})")
    layers = document.get("Layers") if isinstance(document, dict) else None
    if not layers:
        return Placement(
            dla_core,
            unknown_reason="the engine lists no layers (built with ProfilingVerbosity NONE?)",
        )
    dla: list[str] = []
    gpu: list[str] = []
    for layer in layers:
        name, layer_type = _name_and_type(layer)
        if _OTHER_PROFILE.search(name) or name.endswith(_TRANSFER_SUFFIXES):
            continue
        if dla_core is not None and _runs_on_dla(name, layer_type):
            dla.append(name)
        else:
            gpu.append(name)
    return Placement(dla_core, tuple(dla), tuple(gpu))


def _name_and_type(layer: object) -> tuple[str, str]:
    if isinstance(layer, dict):
        return str(layer.get("Name", "")), str(layer.get("LayerType", ""))
    return str(layer), ""


def _runs_on_dla(name: str, layer_type: str) -> bool:
    if "dla" in layer_type.lower():
        return True
    return name.startswith("{ForeignNode[") and layer_type.lower() != "myelin"


def _count(names: tuple[str, ...]) -> str:
    return f"{len(names)} layer" if len(names) == 1 else f"{len(names)} layers"


def _names(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
