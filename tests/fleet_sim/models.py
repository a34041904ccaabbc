"""The one model every simulated device serves: ``lane``, a python model
run in-process (about 30 MB less per daemon than an ONNX Runtime session,
which counts at 20 daemons on one machine). Its versions differ only in
what they answer, so a scenario can build a version that passes the
rollout gates (``agrees=True``: Y = X, as every version before it) or one
that fails them (Y = X + 1)."""

from __future__ import annotations

from pathlib import Path

from model_fixtures import PYTHON_XY_CONFIG, PYTHON_XY_IDENTITY, write_model

MODEL = "lane"

_DISAGREEING = PYTHON_XY_IDENTITY.replace(".as_numpy()", ".as_numpy() + 1")


def model_py(agrees: bool = True) -> str:
    return PYTHON_XY_IDENTITY if agrees else _DISAGREEING


def write_lane_model(repository: Path, versions: tuple[int, ...] = (1,)) -> Path:
    """``lane`` with ``versions``, each answering Y = X; returns the model folder."""
    files = {f"{version}/model.py": PYTHON_XY_IDENTITY for version in versions}
    return write_model(repository, MODEL, PYTHON_XY_CONFIG.format(name=MODEL), files)


def write_lane_version(folder: Path, agrees: bool = True) -> Path:
    """One version folder's contents (``model.py``) in ``folder``, as an
    operator would pack it into an artifact; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(model_py(agrees).lstrip())
    return folder
