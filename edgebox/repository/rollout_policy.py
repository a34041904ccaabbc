"""How a new version of a model proves itself before it serves: the
``rollout:`` section of the settings (the device-wide default) and the same
fields as ``rollout_<field>`` parameters in a model's ``config.pbtxt``
(``rollout`` alone for the policy), so a model's rollout travels with it.

One dataclass serves both: the settings loader parses it as a section, and
``policy_of`` overlays a config's parameters field by field, so a parameter
and a setting can never mean different things (docs/rollout.md).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterator, Mapping

POLICIES = ("immediate", "shadow", "canary")
COMPARE_BUILT_IN = ("tensors", "lanes")
CUSTOM_COMPARE_FILE = "rollout_compare.py"
"""A model's own comparison rule (``rollout_compare: custom``): a file beside
its ``config.pbtxt`` defining ``compare(baseline, candidate)``."""


@dataclasses.dataclass(frozen=True)
class RolloutPolicy:
    """What a new version of a model must show, on live requests, before it
    takes the serving version's place (edgebox/lifecycle/rollout/)."""

    policy: str = "immediate"
    """``immediate``: a new version serves as soon as it is ready (Triton's
    behaviour); ``shadow``: it answers copies of live requests, unseen by
    clients, until ``samples`` answers were compared; ``canary``: it answers
    ``canary_percent`` of live requests for real. A config sets it with the
    ``rollout`` parameter."""
    samples: int = 50
    """Compared answers (shadow) or answered requests (canary) before the
    version is judged."""
    canary_percent: float = 10.0
    """Share of the model's default-version requests a canary answers (0..100)."""
    compare: str = "tensors"
    """How a shadow answer is compared with the serving one: ``tensors``
    (every output within ``rtol``/``atol``), ``lanes`` (the same lane count,
    points within ``max_px``), or ``custom`` (the model folder's
    ``rollout_compare.py``)."""
    rtol: float = 1e-3
    """Relative tolerance of the ``tensors`` rule."""
    atol: float = 1e-5
    """Absolute tolerance of the ``tensors`` rule."""
    max_px: float = 2.0
    """Largest mean distance, in pixels, between matched lane points (``lanes``)."""
    min_agreement: float = 0.95
    """Share of compared answers that must agree (0..1)."""
    max_error_rate: float = 0.0
    """How much more often (a share of 0..1) the new version may fail than the
    serving one."""
    max_latency_ratio: float = 1.5
    """The new version's p95 latency may be at most this many times the
    serving version's ..."""
    latency_allowance_ms: float = 1.0
    """... plus this many milliseconds, so that sub-millisecond models are not
    judged on scheduling noise."""
    watch_s: float = 300.0
    """Seconds a promoted version is watched, the previous one still loaded:
    if it fails or slows past the gates meanwhile, edgebox rolls back on its
    own. Also how long any new version counts as on trial, when a daemon
    crash quarantines it."""

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.policy not in POLICIES:
            yield "policy", f"expected one of {', '.join(POLICIES)}, got {self.policy!r}"
        if not 1 <= self.samples <= 100_000:
            yield "samples", f"expected 1..100000, got {self.samples}"
        if not 0 < self.canary_percent <= 100:
            yield "canary_percent", f"expected more than 0, at most 100, got {self.canary_percent}"
        if self.compare not in (*COMPARE_BUILT_IN, "custom"):
            yield "compare", f"expected tensors, lanes or custom, got {self.compare!r}"
        for name in ("rtol", "atol", "max_px", "latency_allowance_ms", "watch_s"):
            if getattr(self, name) < 0:
                yield name, f"expected a number >= 0, got {getattr(self, name)}"
        for name in ("min_agreement", "max_error_rate"):
            if not 0 <= getattr(self, name) <= 1:
                yield name, f"expected 0..1, got {getattr(self, name)}"
        if self.max_latency_ratio < 1:
            yield "max_latency_ratio", f"expected a number >= 1, got {self.max_latency_ratio}"

    def describe(self) -> dict:
        return dataclasses.asdict(self)


def parameter_name(field: str) -> str:
    """The ``config.pbtxt`` parameter for a field: ``rollout`` for the
    policy, ``rollout_<field>`` for the others."""
    return "rollout" if field == "policy" else f"rollout_{field}"


def rollout_problems(config) -> list[str]:
    """What is wrong with a config's ``rollout*`` parameters on their own
    (the config rules report it with file and line), and a shadow or canary
    asked of a model whose answers cannot be paired or split."""
    try:
        policy = policy_of(config, RolloutPolicy())
    except ValueError as exc:
        return [str(exc)]
    if policy.policy != "immediate" and (problem := unsplittable(config)):
        return [f"parameters 'rollout': {policy.policy} needs {problem}"]
    return []


def unsplittable(config) -> str:
    """Why requests of this model cannot be copied to, or shared with, a new
    version ("" when they can): a sequence's requests carry state, a
    decoupled model's answers are not one per request."""
    if config.HasField("sequence_batching"):
        return "a model without sequence_batching (a sequence's state lives in one version)"
    if config.model_transaction_policy.decoupled:
        return "a model that is not decoupled (one answer per request to compare)"
    return ""


def policy_of(config, default: RolloutPolicy) -> RolloutPolicy:
    """``default`` with the config's ``rollout*`` parameters laid over it.
    Raises ValueError naming the parameter and what it expected."""
    changes: dict[str, object] = {}
    parameters = getattr(config, "parameters", None) or {}
    for field in dataclasses.fields(RolloutPolicy):
        key = parameter_name(field.name)
        entry = parameters.get(key)
        if entry is None:
            continue
        text = entry.string_value.strip()
        changes[field.name] = _converted(key, text, type(getattr(default, field.name)))
    known = {parameter_name(f.name) for f in dataclasses.fields(RolloutPolicy)}
    for key in parameters:
        if key.startswith("rollout") and key not in known:
            raise ValueError(
                f"parameters '{key}': not a rollout parameter; expected one of "
                f"{', '.join(sorted(known))}"
            )
    policy = dataclasses.replace(default, **changes)
    for field, problem in policy.problems():
        raise ValueError(f"parameters '{parameter_name(field)}': {problem}")
    return policy


def policy_from_mapping(
    mapping: Mapping[str, object], default: RolloutPolicy | None = None
) -> RolloutPolicy:
    """``default`` (the built-in policy when None) with ``mapping``'s fields
    laid over it: a fleet document's ``rollout`` (JSON: numbers are numbers,
    never text). Raises ValueError naming the field and what it expected,
    and an unknown field with the likely one."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"rollout: expected a mapping of policy fields, got {mapping!r}")
    base = default or RolloutPolicy()
    kinds = {field.name: type(getattr(base, field.name)) for field in dataclasses.fields(base)}
    changes: dict[str, object] = {}
    for name, value in mapping.items():
        kind = kinds.get(name)
        if kind is None:
            guess = difflib.get_close_matches(str(name), list(kinds), n=1)
            hint = f"; did you mean '{guess[0]}'?" if guess else ""
            raise ValueError(f"rollout: unknown field {name!r}{hint} (expected {', '.join(kinds)})")
        changes[name] = _typed(name, value, kind)
    policy = dataclasses.replace(base, **changes)
    for field, problem in policy.problems():
        raise ValueError(f"rollout.{field}: {problem}")
    return policy


def _typed(name: str, value: object, kind: type) -> object:
    if kind is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"rollout.{name}: expected text, got {value!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        expected = "an integer" if kind is int else "a number"
        raise ValueError(f"rollout.{name}: expected {expected}, got {value!r}")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"rollout.{name}: expected an integer, got {value!r}")
        return int(value)
    if not math.isfinite(value):
        raise ValueError(f"rollout.{name}: expected a finite number, got {value!r}")
    return float(value)


def _converted(key: str, text: str, kind: type) -> object:
    if kind is str:
        return text
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        expected = "an integer" if kind is int else "a number"
        raise ValueError(f"parameters '{key}': expected {expected}, got {text!r}") from None
