"""A model whose graph needs a custom op, and a real library that provides it.

The config is the custom-operations tutorial's (the seed fixture
``seed_onnx_custom_ops``: x FP32 [4] -> y FP32 [4] with ``model_operations``),
with its library path swapped for one inside the model folder. The graph
reads x as a 2x2 matrix and inverts it with ``Inverse`` from the
``ai.onnx.contrib`` domain, which only onnxruntime-extensions' library
provides; the tests compute the inverse with numpy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime_extensions
from onnx import TensorProto, helper, numpy_helper

from model_fixtures import write_model
from scripts.onnx_builders import IR_VERSION, OPSET

SEED_CONFIG = Path(__file__).parent / "repository/fixtures/seeds/seed_onnx_custom_ops/config.pbtxt"
SEED_LIBRARY = "/path/to/libonnxcustom.so"
"""The library path as the tutorial writes it."""
LIBRARY = "ops/libonnxcustom.so"
"""Where the models here keep their copy, relative to the model folder."""
CONTRIB_DOMAIN = "ai.onnx.contrib"


def extensions_library() -> Path:
    """onnxruntime-extensions' custom-op library, as installed."""
    return Path(onnxruntime_extensions.get_library_path())


def build_inverse_model(path: Path) -> Path:
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "square"], ["matrix"]),
            helper.make_node("Inverse", ["matrix"], ["inverse"], domain=CONTRIB_DOMAIN),
            helper.make_node("Reshape", ["inverse", "flat"], ["y"]),
        ],
        "inverse",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        initializer=[
            numpy_helper.from_array(np.array([2, 2], dtype=np.int64), "square"),
            numpy_helper.from_array(np.array([4], dtype=np.int64), "flat"),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB_DOMAIN, 1)],
    )
    model.ir_version = IR_VERSION
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def custom_op_config(library: str | None) -> str:
    """The tutorial's config naming ``library``; without ``model_operations``
    when None."""
    lines = SEED_CONFIG.read_text().splitlines(keepends=True)
    if library is None:
        return "".join(line for line in lines if "model_operations" not in line)
    return "".join(lines).replace(SEED_LIBRARY, library)


def add_inverse_model(
    repository: Path, name: str, library: str | None = LIBRARY, copy_library: bool = True
) -> Path:
    """The model folder: config, ``1/model.onnx`` and, unless told not to, a
    copy of the extensions library at ``library``."""
    model_dir = write_model(repository, name, custom_op_config(library))
    build_inverse_model(model_dir / "1" / "model.onnx")
    if library is not None and copy_library:
        target = model_dir / library
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(extensions_library(), target)
    return model_dir


def random_invertible(seed: int) -> np.ndarray:
    """Four FP32 values that read as a well-conditioned 2x2 matrix."""
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(-1.0, 1.0, (2, 2)) + 3.0 * np.eye(2)
    return matrix.astype(np.float32).reshape(4)


def inverse_of(x: np.ndarray) -> np.ndarray:
    return np.linalg.inv(x.astype(np.float64).reshape(2, 2)).reshape(4)
