"""The model's own preprocessing, found in the repository and run on each
calibration image, so INT8 ranges are measured on the tensors the engine
will really be given.

The preprocessing is a python-backend model that feeds the engine's model
inside an ensemble: in the demo, ``lane_pipeline`` maps ``lane_preprocess``'s
output ``input`` to ``lane_detector``'s input ``input``. ``--preprocess-model``
names it directly when no ensemble says so (e.g. when building into a new
model name). It runs in this process through edgebox's python backend, so its
``model.py`` behaves exactly as it does in the daemon.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.backends.base import ModelContext
from edgebox.backends.one_instance import OneInstance
from edgebox.backends.python import Backend as PythonBackend
from edgebox.engine_build.calibration import Sample
from edgebox.errors import ConfigError, EdgeboxError, InvalidArgument, NotFound, Unavailable
from edgebox.repository.config import (
    CONFIG_FILENAME,
    ModelConfig,
    backend_of,
    parse_model_config_file,
)
from edgebox.repository.layout import scan_model, scan_repository
from edgebox.tensors import InferRequest, Tensor, config_type_to_datatype

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")

ImageReader = Callable[[str], "np.ndarray | None"]
"""``cv2.imread``'s contract: a HxWx3 BGR uint8 array, or None when unreadable."""


@dataclass(frozen=True)
class PreprocessingPlan:
    """Which python model to run, and which of its outputs feeds which engine input."""

    model: str
    model_dir: Path
    version: int
    config: ModelConfig
    feeds: tuple[tuple[str, str], ...]
    """(engine input, preprocessing output) pairs."""
    found_in: str
    """How it was chosen, for the report: "ensemble 'lane_pipeline'" or "--preprocess-model"."""


def find_preprocessing(
    repository: Path, model: str, engine_inputs: Sequence[str], override: str | None = None
) -> PreprocessingPlan:
    """The python model that feeds every input of ``model`` in the repository's
    ensembles, or ``override`` with its outputs matched to the engine inputs.
    Raises NotFound or InvalidArgument saying what to pass instead."""
    configs = _read_configs(repository)
    candidates = _ensemble_feeders(configs, model, engine_inputs)
    if override is not None:
        config = _python_model_config(repository, override, configs)
        feeds = next((c[1] for c in candidates if c[0] == override), None)
        if feeds is None:
            feeds = _match_outputs(config, override, engine_inputs)
        return _plan(repository, override, config, feeds, "--preprocess-model")
    if not candidates:
        ensembles = sorted(name for name, c in configs.items() if c.platform == "ensemble")
        looked = f" (ensembles: {', '.join(repr(e) for e in ensembles)})" if ensembles else ""
        raise NotFound(
            f"no ensemble in '{repository}' feeds every input of model '{model}' from a python "
            f"model{looked}; pass --preprocess-model NAME to calibrate through that model"
        )
    distinct = sorted({(name, feeds) for name, feeds, _ in candidates})
    if len(distinct) > 1:
        names = ", ".join(f"'{name}'" for name, _ in distinct)
        raise InvalidArgument(
            f"ensembles in '{repository}' feed model '{model}' from different python models "
            f"({names}); choose one with --preprocess-model NAME"
        )
    name, feeds = distinct[0]
    ensemble = next(e for n, f, e in candidates if (n, f) == (name, feeds))
    return _plan(repository, name, configs[name], feeds, f"ensemble '{ensemble}'")


def list_images(folder: Path) -> list[Path]:
    """Image files directly in ``folder``, sorted by name so calibration is repeatable."""
    if not folder.is_dir():
        raise NotFound(f"--calibration-dir '{folder}' is not a folder")
    images = sorted(
        path
        for path in folder.iterdir()
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file()
    )
    if not images:
        raise NotFound(
            f"--calibration-dir '{folder}' holds no images ({', '.join(IMAGE_SUFFIXES)})"
        )
    return images


def opencv_reader() -> ImageReader:
    try:
        import cv2
    except ImportError as exc:
        raise Unavailable(
            f"OpenCV is not installed ({exc}); on a Jetson install python3-opencv, "
            "elsewhere pip install opencv-python-headless"
        ) from None
    return cv2.imread


class PreprocessingRunner:
    """The preprocessing model loaded through the python backend for the
    length of a ``with`` block; ``run`` executes it on one image."""

    def __init__(self, plan: PreprocessingPlan) -> None:
        self._plan = plan
        context = ModelContext(
            name=plan.model,
            version=plan.version,
            config=plan.config,
            model_dir=plan.model_dir,
            version_dir=plan.model_dir / str(plan.version),
        )
        self._one = OneInstance(PythonBackend(), context, self._find_input)
        self._input: tuple[str, list[int], bool] | None = None

    def _find_input(self, context: ModelContext) -> None:
        self._input = _image_input(context.config, self._plan.model)

    def __enter__(self) -> PreprocessingRunner:
        self._one.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._input = None
        self._one.__exit__(exc_type, exc, traceback)

    def run(self, image: np.ndarray, source: str) -> dict[str, np.ndarray]:
        """Engine input name -> the preprocessing output that feeds it."""
        assert self._input is not None, "use inside 'with'"
        name, dims, batched = self._input
        where = f"model '{self._plan.model}', image '{source}'"
        if not _fits(dims, image.shape):
            raise InvalidArgument(
                f"{where}: the image is {'x'.join(map(str, image.shape))}, input '{name}' "
                f"takes {dims} (-1 = any size)"
            )
        data = image[np.newaxis] if batched else image
        request = InferRequest(self._plan.model, [Tensor(name, "UINT8", data)])
        result = self._one.execute(request)
        if isinstance(result, EdgeboxError):
            raise EdgeboxError(f"calibration image '{source}': {result}", result.code)
        produced = {tensor.name: tensor.data for tensor in result.outputs}
        fed = {}
        for engine_input, output in self._plan.feeds:
            if output not in produced:
                raise EdgeboxError(
                    f"{where}: execute() returned no output '{output}' (it returned "
                    f"{', '.join(repr(n) for n in produced) or 'none'})"
                )
            fed[engine_input] = np.array(produced[output])
        return fed


def calibration_samples(
    images: Sequence[Path], runner: PreprocessingRunner, read: ImageReader
) -> Iterator[Sample]:
    """Lazily: read each image, preprocess it, yield it; an unreadable file stops
    calibration with its name rather than being silently skipped."""
    for path in images:
        image = read(str(path))
        if image is None:
            raise InvalidArgument(f"calibration image '{path}': cannot be read as an image")
        yield str(path), runner.run(image, str(path))


def _read_configs(repository: Path) -> dict[str, ModelConfig]:
    """Every config that parses cleanly; a broken one is `edgebox check`'s
    business unless it is the one needed (then its own error is raised)."""
    configs = {}
    for name, folder in scan_repository(repository, fingerprints=False).models.items():
        try:
            config, problems = parse_model_config_file(folder.path / CONFIG_FILENAME, name)
        except ConfigError:
            continue
        if not problems:
            configs[name] = config
    return configs


def _ensemble_feeders(
    configs: dict[str, ModelConfig], model: str, engine_inputs: Sequence[str]
) -> list[tuple[str, tuple[tuple[str, str], ...], str]]:
    """(python model, feeds, ensemble) for each ensemble step running ``model``
    whose every input comes from one python model's outputs."""
    found = []
    for ensemble, config in sorted(configs.items()):
        if config.platform != "ensemble":
            continue
        steps = list(config.ensemble_scheduling.step)
        producers = {
            tensor: (step.model_name, output)
            for step in steps
            for output, tensor in step.output_map.items()
        }
        for step in steps:
            if step.model_name != model:
                continue
            sources = {}
            for engine_input in engine_inputs:
                tensor = step.input_map.get(engine_input)
                if tensor is None or tensor not in producers:
                    break
                sources[engine_input] = producers[tensor]
            else:
                feeders = {producer for producer, _ in sources.values()}
                if len(feeders) != 1:
                    continue
                feeder = feeders.pop()
                if feeder not in configs or backend_of(configs[feeder]) != "python":
                    continue
                feeds = tuple(sorted((name, out) for name, (_, out) in sources.items()))
                found.append((feeder, feeds, ensemble))
    return found


def _python_model_config(
    repository: Path, name: str, configs: dict[str, ModelConfig]
) -> ModelConfig:
    model_dir = repository / name
    if not model_dir.is_dir():
        raise NotFound(f"--preprocess-model '{name}': no model folder '{model_dir}'")
    config = configs.get(name)
    if config is None:
        config, problems = parse_model_config_file(model_dir / CONFIG_FILENAME, name)
        if problems:
            raise problems[0]
    if backend_of(config) != "python":
        raise InvalidArgument(
            f"--preprocess-model '{name}': it is a '{backend_of(config)}' model; calibration "
            "runs a python-backend model.py"
        )
    return config


def _match_outputs(
    config: ModelConfig, name: str, engine_inputs: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """Outputs named like the engine inputs, or the one output for the one input."""
    outputs = [output.name for output in config.output]
    if all(engine_input in outputs for engine_input in engine_inputs):
        return tuple(sorted((i, i) for i in engine_inputs))
    if len(outputs) == 1 and len(engine_inputs) == 1:
        return ((engine_inputs[0], outputs[0]),)
    raise InvalidArgument(
        f"--preprocess-model '{name}': cannot tell which of its outputs "
        f"({', '.join(repr(o) for o in outputs) or 'none declared'}) feeds which engine input "
        f"({', '.join(repr(i) for i in engine_inputs)}); name the outputs like the inputs, "
        "or describe the pipeline in an ensemble"
    )


def _plan(
    repository: Path,
    name: str,
    config: ModelConfig,
    feeds: tuple[tuple[str, str], ...],
    found_in: str,
) -> PreprocessingPlan:
    model_dir = repository / name
    filename = config.default_model_filename or "model.py"
    versions = [
        number
        for number, folder in scan_model(model_dir, fingerprints=False).versions.items()
        if (folder.path / filename).is_file()
    ]
    if not versions:
        raise NotFound(f"preprocessing model '{name}': no version folder holds {filename}")
    return PreprocessingPlan(name, model_dir, max(versions), config, feeds, found_in)


def _image_input(config: ModelConfig, model: str) -> tuple[str, list[int], bool]:
    """(name, dims without batch, batched) of the one UINT8 image input."""
    if len(config.input) != 1:
        raise InvalidArgument(
            f"preprocessing model '{model}' has {len(config.input)} inputs; calibration "
            "feeds it one image (UINT8, HxWx3 BGR as cv2.imread reads it)"
        )
    tensor = config.input[0]
    datatype = config_type_to_datatype(model_config_pb2.DataType.Name(tensor.data_type))
    if datatype != "UINT8":
        raise InvalidArgument(
            f"preprocessing model '{model}', input '{tensor.name}': expected datatype UINT8 "
            f"(an image as cv2.imread reads it), got {datatype}"
        )
    return tensor.name, list(tensor.dims), config.max_batch_size > 0


def _fits(dims: list[int], shape: tuple[int, ...]) -> bool:
    return len(dims) == len(shape) and all(d in (-1, s) for d, s in zip(dims, shape, strict=True))
