"""Which layers run on the DLA and which on the GPU, shown after a DLA build.

TensorRT moves a layer the DLA cannot run to the GPU without an error when
GPU fallback is on, so an engine "built for DLA" may run mostly on the GPU.
Two views are shown, as trtexec shows them: the per-layer answer of
``IBuilderConfig.can_run_on_DLA`` before the build, and the post-fusion lists
TensorRT itself logs during the build (``[DlaLayer]`` / ``[GpuLayer]``) when its
version logs them.
"""

from __future__ import annotations

from dataclasses import dataclass

DLA = "DLA"
GPU = "GPU"

_BUILDER_MARKERS = ("[DlaLayer]", "[GpuLayer]")


@dataclass(frozen=True)
class LayerPlacement:
    name: str
    kind: str
    """TensorRT's layer type, e.g. CONVOLUTION."""
    device: str
    """``DLA`` or ``GPU``."""


@dataclass(frozen=True)
class PlacementReport:
    dla_core: int | None
    gpu_fallback: bool
    layers: tuple[LayerPlacement, ...] = ()
    builder_lines: tuple[str, ...] = ()
    """TensorRT's own ``[DlaLayer]`` / ``[GpuLayer]`` log lines from the build."""

    @property
    def gpu_layers(self) -> tuple[LayerPlacement, ...]:
        return tuple(layer for layer in self.layers if layer.device == GPU)

    def lines(self) -> list[str]:
        if self.dla_core is None:
            return [f"layer placement: all {len(self.layers)} layers on the GPU (no --dla-core)"]
        on_dla = len(self.layers) - len(self.gpu_layers)
        fallback = "on" if self.gpu_fallback else "off"
        lines = [
            f"layer placement (DLA core {self.dla_core}, GPU fallback {fallback}): "
            f"{on_dla} of {len(self.layers)} layers on the DLA, "
            f"{len(self.gpu_layers)} on the GPU"
        ]
        if on_dla == 0 and self.layers:
            lines.append("  warning: no layer runs on the DLA; this engine runs on the GPU only")
        for layer in self.gpu_layers:
            lines.append(f"  GPU  '{layer.name}' ({layer.kind}): not supported on the DLA")
        if self.builder_lines:
            lines.append("TensorRT's placement after layer fusion:")
            lines.extend(f"  {line}" for line in self.builder_lines)
        return lines


def builder_placement_lines(messages: list[str]) -> tuple[str, ...]:
    """The ``[DlaLayer] ...`` / ``[GpuLayer] ...`` messages TensorRT logs at
    INFO severity after choosing placements (TensorRT 8.x prints them under
    "Layers Running on DLA/GPU" headers)."""
    return tuple(
        message.strip() for message in messages if message.strip().startswith(_BUILDER_MARKERS)
    )
