"""The demo's lane detector as the engines section tests it: its ONNX file,
a road frame taken through its pipeline's steps up to it, ONNX Runtime's
answer as the reference, and the pipeline's steps after it to turn any
answer into lanes.

The detector is ``lane_detector`` in the settings' model repository; its
pipeline is the ensemble that runs it and answers lanes (``lane_pipeline``
in the demo: ``lane_preprocess`` -> detector -> ``lane_postprocess``). The
other steps and the reference run through edgebox's own backends on the CPU
(``loaded_model``), so an engine is judged by the lanes the daemon would
publish from its answer, not by raw proposals: a detector's raw output holds
thousands of anchors whose x means nothing unless the anchor is a lane, and
FP16 rounding flips a few of those near the threshold without moving a lane.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.backends import BackendCatalog
from edgebox.errors import ConfigError, EdgeboxError
from edgebox.repository.config import CONFIG_FILENAME, ModelConfig, parse_model_config_file
from edgebox.repository.layout import scan_repository
from edgebox.repository.rollout_policy import RolloutPolicy, policy_of
from edgebox.selftest.loaded_model import Arrays, LoadedModel
from edgebox.summaries.lanes import LANE_OUTPUTS

DETECTOR = "lane_detector"

FRAME_WIDTH, FRAME_HEIGHT = 640, 360


@dataclass(frozen=True)
class PipelineStep:
    model: str
    inputs: dict[str, str]
    """The model's input -> the ensemble tensor it reads."""
    outputs: dict[str, str]
    """The model's output -> the ensemble tensor it writes."""


class DetectorCase:
    """Loads the detector's pipeline for the length of a ``with`` block.
    Raises EdgeboxError saying what is missing: the detector, an ONNX file,
    an ensemble that turns its answer into lanes, or a step that will not load."""

    def __init__(self, repository: Path, catalog: BackendCatalog | None = None) -> None:
        self.repository = repository
        self._catalog = catalog or BackendCatalog()
        self._stack = ExitStack()
        self._models: dict[str, LoadedModel] = {}
        self.ensemble = ""
        self._steps: list[PipelineStep] = []
        self._image_input = ""
        self._batched = False
        self.max_px = RolloutPolicy().max_px
        self.feeds: Arrays = {}
        """The detector's inputs for the road frame, as the pipeline makes them."""
        self.reference: Arrays = {}
        """ONNX Runtime's answer to ``feeds``."""
        self.reference_lanes: Arrays = {}

    def __enter__(self) -> DetectorCase:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stack.close()

    @property
    def detector(self) -> LoadedModel:
        return self._models[DETECTOR]

    @property
    def onnx_path(self) -> Path:
        return self.detector.model_file

    def lanes(self, answer: Arrays) -> Arrays:
        """The pipeline's lane outputs with ``answer`` in the detector's place."""
        return self._walk(lambda feeds: answer)

    def _open(self) -> None:
        detector = LoadedModel(self.repository, DETECTOR, self._catalog)
        if detector.config.platform != "onnxruntime_onnx":
            raise EdgeboxError(
                f"model '{DETECTOR}' is a '{detector.config.platform or detector.config.backend}' "
                "model; the self-test builds its engines from the ONNX version"
            )
        try:
            self.max_px = policy_of(detector.config, RolloutPolicy()).max_px
        except ValueError as exc:
            raise EdgeboxError(f"model '{DETECTOR}': {exc}") from None
        self.ensemble, config = _lane_ensemble(self.repository)
        self._steps = [
            PipelineStep(step.model_name, dict(step.input_map), dict(step.output_map))
            for step in config.ensemble_scheduling.step
        ]
        self._image_input, self._batched = _image_input(config, self.ensemble)
        self._models[DETECTOR] = self._stack.enter_context(detector)
        for step in self._steps:
            if step.model not in self._models:
                model = LoadedModel(self.repository, step.model, self._catalog)
                self._models[step.model] = self._stack.enter_context(model)

        def reference(feeds: Arrays) -> Arrays:
            self.feeds = feeds
            self.reference = self.detector.run(feeds)
            return self.reference

        self.reference_lanes = self._walk(reference)

    def _walk(self, detector: Callable[[Arrays], Arrays]) -> Arrays:
        """Run the ensemble on the road frame, each step once its inputs
        exist (Triton's order), ``detector`` answering for the detector."""
        frame = road_frame()
        tensors: Arrays = {self._image_input: frame[np.newaxis] if self._batched else frame}
        pending = list(self._steps)
        while pending:
            step = next((s for s in pending if set(s.inputs.values()) <= set(tensors)), None)
            if step is None:
                raise EdgeboxError(
                    f"ensemble '{self.ensemble}': step '{pending[0].model}' waits for tensors "
                    "no step writes"
                )
            pending.remove(step)
            feeds = {name: tensors[tensor] for name, tensor in step.inputs.items()}
            run = detector if step.model == DETECTOR else self._models[step.model].run
            produced = run(feeds)
            for name, tensor in step.outputs.items():
                if name not in produced:
                    raise EdgeboxError(
                        f"ensemble '{self.ensemble}': model '{step.model}' gave no output '{name}'"
                    )
                tensors[tensor] = produced[name]
        return {name: tensors[name] for name in LANE_OUTPUTS}


def road_frame() -> np.ndarray:
    """A 640x360 BGR road with three painted lines meeting at the horizon:
    the detector (``scripts/lane_detector.py``) looks for bright thin ridges
    converging on a vanishing point, so it finds three lanes here. Drawn
    rather than taken from ``streams/synthetic_road``: only the daemon and
    the cameras check reach into streams/. OpenCV is imported here, not
    with the module, so the self-test reports a missing OpenCV as a check."""
    import cv2

    frame = np.empty((FRAME_HEIGHT, FRAME_WIDTH, 3), np.uint8)
    horizon = int(FRAME_HEIGHT * 0.45)
    frame[:horizon] = (150, 140, 130)
    frame[horizon:] = (70, 70, 70)
    vanishing_x = FRAME_WIDTH // 2
    for bottom_x in (int(FRAME_WIDTH * 0.1), int(FRAME_WIDTH * 0.55), int(FRAME_WIDTH * 0.95)):
        top = (
            vanishing_x + (bottom_x - vanishing_x) // 8,
            horizon + (FRAME_HEIGHT - horizon) // 8,
        )
        cv2.line(frame, (bottom_x, FRAME_HEIGHT - 1), top, (235, 235, 235), 4, cv2.LINE_AA)
    return frame


def _lane_ensemble(repository: Path) -> tuple[str, ModelConfig]:
    """The first ensemble (by name) that runs the detector and answers lanes."""
    for name, folder in sorted(scan_repository(repository, fingerprints=False).models.items()):
        try:
            config, problems = parse_model_config_file(folder.path / CONFIG_FILENAME, name)
        except ConfigError:
            continue
        if problems or config.platform != "ensemble":
            continue
        runs_detector = any(s.model_name == DETECTOR for s in config.ensemble_scheduling.step)
        outputs = {output.name for output in config.output}
        if runs_detector and set(LANE_OUTPUTS) <= outputs:
            return name, config
    raise EdgeboxError(
        f"no ensemble in '{repository}' runs '{DETECTOR}' and answers lanes "
        f"({', '.join(LANE_OUTPUTS)}), as the demo's lane_pipeline does"
    )


def _image_input(config: ModelConfig, ensemble: str) -> tuple[str, bool]:
    """(name, batched) of the ensemble's one UINT8 image input."""
    inputs = list(config.input)
    if len(inputs) != 1 or inputs[0].data_type != model_config_pb2.TYPE_UINT8:
        raise EdgeboxError(
            f"ensemble '{ensemble}': expected one UINT8 image input (HxWx3 BGR), got "
            + ", ".join(f"'{tensor.name}'" for tensor in inputs)
        )
    return inputs[0].name, config.max_batch_size > 0
