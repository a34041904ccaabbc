"""Optimization profiles: which one a request's shapes fit, and which ones an
instance may use.

An engine built with dynamic shapes carries one or more profiles, each a
min/max range per dynamic input. Triton's ``instance_group { profile: [...] }``
lists the profiles an instance may use (by index, as strings); without a list
an instance uses profile 0 only, as Triton does. Among the allowed profiles the
one already active is kept when the request fits it (switching costs a
``set_optimization_profile_async``), otherwise the first that fits wins.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ShapeRange:
    """What one input accepts under one profile; a static input's range is its
    shape three times."""

    min: Shape
    opt: Shape
    max: Shape

    def contains(self, shape: Sequence[int]) -> bool:
        if len(shape) != len(self.min):
            return False
        return all(
            low <= size <= high for size, low, high in zip(shape, self.min, self.max, strict=True)
        )

    def describe(self) -> str:
        if self.min == self.max:
            return _shape_text(self.min)
        return f"{_shape_text(self.min)}..{_shape_text(self.max)}"


@dataclass(frozen=True)
class Profile:
    index: int
    ranges: Mapping[str, ShapeRange]
    """Input name -> accepted shapes, for every input of the engine."""

    def accepts(self, shapes: Mapping[str, Sequence[int]]) -> bool:
        return all(
            name in self.ranges and self.ranges[name].contains(shape)
            for name, shape in shapes.items()
        )

    def max_batch_size(self) -> int:
        """The largest first dimension every input accepts; 0 when some input
        has no dimensions at all (nothing to batch along)."""
        if not self.ranges or any(not r.max for r in self.ranges.values()):
            return 0
        return min(r.max[0] for r in self.ranges.values())

    def describe(self) -> str:
        parts = ", ".join(f"'{name}' {r.describe()}" for name, r in self.ranges.items())
        return f"profile {self.index}: {parts}"


class ProfileNameError(ValueError):
    """An ``instance_group`` profile entry that names no profile of the engine."""


def allowed_profiles(names: Sequence[str], profile_count: int) -> list[int]:
    """The profile indices an instance group may use. Raises ProfileNameError
    naming the entry and the engine's profile count."""
    if not names:
        return [0]
    indices: list[int] = []
    for name in names:
        try:
            index = int(name)
        except ValueError:
            index = -1
        if not 0 <= index < profile_count:
            raise ProfileNameError(
                f"instance_group profile '{name}' is not a profile of the engine, which has "
                f'{profile_count} (use "0" to "{profile_count - 1}")'
            )
        if index not in indices:
            indices.append(index)
    return indices


def choose_profile(
    profiles: Sequence[Profile],
    shapes: Mapping[str, Sequence[int]],
    allowed: Sequence[int],
    current: int | None = None,
) -> int | None:
    """The profile to run ``shapes`` with, or None when no allowed one fits."""
    by_index = {p.index: p for p in profiles}
    if current in allowed and current in by_index and by_index[current].accepts(shapes):
        return current
    for index in allowed:
        profile = by_index.get(index)
        if profile is not None and profile.accepts(shapes):
            return index
    return None


def no_profile_message(
    profiles: Sequence[Profile], shapes: Mapping[str, Sequence[int]], allowed: Sequence[int]
) -> str:
    got = ", ".join(f"'{name}' {_shape_text(tuple(shape))}" for name, shape in shapes.items())
    ranges = "; ".join(p.describe() for p in profiles if p.index in allowed)
    return f"no optimization profile of this instance accepts {got} ({ranges})"


def max_batch_size(profiles: Sequence[Profile], allowed: Sequence[int]) -> int:
    """Triton's rule: the largest batch any allowed profile takes."""
    sizes = [p.max_batch_size() for p in profiles if p.index in allowed]
    return max(sizes, default=0)


def _shape_text(shape: Shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
