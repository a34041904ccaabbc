"""One model version loaded through its edgebox backend on the CPU for the
length of a ``with`` block, run on plain arrays.

The engines section runs the demo pipeline's python steps and the ONNX
Runtime reference this way, so they behave as they do in the daemon (the
same ``model.py`` contract, the same session options), without starting
one. Use from one thread.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.backends import BackendCatalog
from edgebox.backends.base import ModelContext
from edgebox.backends.one_instance import OneInstance
from edgebox.errors import EdgeboxError
from edgebox.repository.config import CONFIG_FILENAME, backend_of, parse_model_config_file
from edgebox.repository.layout import scan_model
from edgebox.tensors import InferRequest, Tensor, config_type_to_datatype

Arrays = dict[str, np.ndarray]


class LoadedModel:
    """The highest version of ``model`` in ``repository`` that holds its model
    file; ``run`` executes one request. Raises EdgeboxError (with the config's
    own problem, or the backend's reason) when it cannot load."""

    def __init__(self, repository: Path, model: str, catalog: BackendCatalog) -> None:
        self.model_dir = repository / model
        config, problems = parse_model_config_file(self.model_dir / CONFIG_FILENAME, model)
        if problems:
            raise problems[0]
        self.config = config
        self.version = highest_version(self.model_dir, config)
        self.context = ModelContext(
            name=model,
            version=self.version,
            config=config,
            model_dir=self.model_dir,
            version_dir=self.model_dir / str(self.version),
        )
        self._one = OneInstance(catalog.get(backend_of(config)), self.context)

    def __enter__(self) -> LoadedModel:
        self._one.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._one.__exit__(exc_type, exc, traceback)

    @property
    def model_file(self) -> Path:
        return self.context.model_file()

    def run(self, inputs: Arrays) -> Arrays:
        """Every output, by name; arrays are sent with the datatypes the config declares."""
        declared = {
            tensor.name: config_type_to_datatype(model_config_pb2.DataType.Name(tensor.data_type))
            for tensor in self.config.input
        }
        tensors = [Tensor(name, declared.get(name, "FP32"), data) for name, data in inputs.items()]
        result = self._one.execute(InferRequest(self.context.name, tensors))
        if isinstance(result, EdgeboxError):
            raise result
        return {tensor.name: np.asarray(tensor.data) for tensor in result.outputs}


def highest_version(model_dir: Path, config: model_config_pb2.ModelConfig) -> int:
    """The highest version folder holding the config's model file (``model.onnx``,
    ``model.py``...), as the default version policy serves."""
    filename = config.default_model_filename
    versions = [
        number
        for number, folder in scan_model(model_dir, fingerprints=False).versions.items()
        if not filename or (folder.path / filename).is_file()
    ]
    if not versions:
        raise EdgeboxError(f"model '{model_dir.name}': no version folder holds {filename}")
    return max(versions)
