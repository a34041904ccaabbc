"""Comparison rules: does a new version's answer agree with the serving
version's answer to the same request?

A rule is chosen by the model's ``rollout_compare`` parameter, as the MQTT
summaries are: ``tensors`` (every output within tolerances), ``lanes`` (a
lane detector's answer compared as lanes, in pixels, so that a detector
re-exported with different float rounding passes while one that shifts lanes
fails), or ``custom``: the model folder's own ``rollout_compare.py``. Answers
are plain ``{output name: array}``; a rule says whether they agree and, when
they do not, by how much, in words an operator can act on.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from edgebox.errors import EdgeboxError
from edgebox.repository.contained_path import resolve_inside
from edgebox.repository.rollout_policy import CUSTOM_COMPARE_FILE, RolloutPolicy
from edgebox.summaries.lanes import LANE_OUTPUTS, decode_lanes
from edgebox.summaries.tensors import SummaryError

Answer = dict[str, np.ndarray]


class Comparison(NamedTuple):
    agree: bool
    detail: str = ""
    """Why they differ (``OUTPUT0 max |diff| 32.0 > atol 1e-05``); "" when they agree."""


Compare = Callable[[Answer, Answer], Comparison]


def comparer_for(policy: RolloutPolicy, model_dir: Path) -> Compare:
    """The policy's rule; a custom one is imported from the model folder
    here, once (EdgeboxError when the file is missing or broken)."""
    if policy.compare == "lanes":
        return lambda baseline, candidate: compare_lanes(baseline, candidate, policy.max_px)
    if policy.compare == "custom":
        return _custom(model_dir, policy)
    return lambda baseline, candidate: compare_tensors(
        baseline, candidate, policy.rtol, policy.atol
    )


def compare_tensors(baseline: Answer, candidate: Answer, rtol: float, atol: float) -> Comparison:
    """Every output of the serving answer, element by element: equal for
    BYTES and booleans, within ``atol + rtol * |serving|`` for numbers (numpy's
    ``isclose``); NaN agrees only with NaN."""
    for name, expected in baseline.items():
        got = candidate.get(name)
        if got is None:
            return Comparison(False, f"{name} missing from the new version's answer")
        if got.shape != expected.shape:
            return Comparison(False, f"{name} shape {list(got.shape)} != {list(expected.shape)}")
        if expected.dtype.kind in "OSUb" or got.dtype.kind in "OSUb":
            if not np.array_equal(expected, got):
                return Comparison(False, f"{name} differs")
            continue
        wanted = expected.astype(np.float64, copy=False)
        actual = got.astype(np.float64, copy=False)
        close = np.isclose(actual, wanted, rtol=rtol, atol=atol, equal_nan=True)
        if not close.all():
            diff = np.abs(actual - wanted)
            worst = float(np.nanmax(np.where(close, 0.0, diff))) if diff.size else 0.0
            if math.isnan(worst) or not np.isfinite(diff[~close]).all():
                return Comparison(
                    False, f"{name} has NaN or infinity where the serving one has not"
                )
            return Comparison(False, f"{name} max |diff| {round(worst, 6)!r} > atol {atol!r}")
    return Comparison(True)


def compare_lanes(baseline: Answer, candidate: Answer, max_px: float) -> Comparison:
    """The same number of lanes, and matched lanes' points within ``max_px``
    on average. Lanes are matched in order of their mean x; each serving
    point is measured to the nearest point of its matched lane."""
    try:
        expected = _lanes(baseline)
        got = _lanes(candidate)
    except SummaryError as exc:
        return Comparison(False, f"lanes: {exc}")
    if len(expected) != len(got):
        return Comparison(
            False, f"lanes: {len(got)} lanes, the serving version sees {len(expected)}"
        )
    distances: list[float] = []
    for want, have in zip(expected, got, strict=True):
        if not len(want) or not len(have):
            if len(want) != len(have):
                return Comparison(False, "lanes: a lane has no points in one answer only")
            continue
        gaps = np.linalg.norm(want[:, None, :] - have[None, :, :], axis=2)
        distances.extend(gaps.min(axis=1).tolist())
    mean = float(np.mean(distances)) if distances else 0.0
    if mean > max_px:
        return Comparison(
            False, f"lanes: mean point distance {round(mean, 1)!r} px > max_px {max_px!r}"
        )
    return Comparison(True)


def _lanes(answer: Answer) -> list[np.ndarray]:
    missing = [name for name in LANE_OUTPUTS if name not in answer]
    if missing:
        raise SummaryError(f"the lanes rule needs outputs {', '.join(missing)}")
    lanes = decode_lanes(*(answer[name] for name in LANE_OUTPUTS))
    points = [np.asarray(lane["points"], dtype=np.float64).reshape(-1, 2) for lane in lanes]
    return sorted(points, key=lambda p: float(p[:, 0].mean()) if len(p) else 0.0)


def _custom(model_dir: Path, policy: RolloutPolicy) -> Compare:
    """``compare(baseline, candidate)`` from the model folder's
    ``rollout_compare.py`` (or ``compare(baseline, candidate, policy)``, to
    read the config's tolerances: ``policy.max_px``, ``policy.atol``...),
    returning a bool or ``(bool, detail)``; a rule that raises or returns
    anything else counts as disagreement, with why."""
    where = f"model '{model_dir.name}' rollout_compare"
    path = resolve_inside(model_dir, CUSTOM_COMPARE_FILE, "rollout_compare", where)
    spec = importlib.util.spec_from_file_location(f"edgebox_rollout_compare_{model_dir.name}", path)
    if spec is None or spec.loader is None:
        raise EdgeboxError(f"{where}: cannot import {CUSTOM_COMPARE_FILE}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise EdgeboxError(f"{where}: {CUSTOM_COMPARE_FILE} failed to import: {exc}") from None
    rule = getattr(module, "compare", None)
    if not callable(rule):
        raise EdgeboxError(
            f"{where}: {CUSTOM_COMPARE_FILE} defines no compare(baseline, candidate)"
        )
    try:
        wants_policy = len(inspect.signature(rule).parameters) >= 3
    except (TypeError, ValueError):
        wants_policy = False
    extra = (policy,) if wants_policy else ()

    def compare(baseline: Answer, candidate: Answer) -> Comparison:
        try:
            verdict = rule(baseline, candidate, *extra)
        except Exception as exc:
            return Comparison(False, f"{CUSTOM_COMPARE_FILE} raised {type(exc).__name__}: {exc}")
        if isinstance(verdict, tuple) and len(verdict) == 2:
            return Comparison(bool(verdict[0]), "" if verdict[0] else str(verdict[1]))
        if isinstance(verdict, bool | np.bool_):
            return Comparison(bool(verdict), "" if verdict else f"{CUSTOM_COMPARE_FILE} said no")
        return Comparison(False, f"{CUSTOM_COMPARE_FILE} returned {type(verdict).__name__}")

    return compare
