"""``version_policy`` -> the versions to serve, as Triton documents it: ``latest``
(the ``num_versions`` highest, default 1), ``all``, or ``specific``.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#version-policy
"""

from __future__ import annotations

from collections.abc import Iterable


def select_versions(policy, available: Iterable[int]) -> list[int]:
    """Versions to load, highest first. ``specific`` versions absent on disk are
    left out; ``missing_specific_versions`` names them."""
    present = sorted(set(available), reverse=True)
    choice = policy.WhichOneof("policy_choice") or "latest"
    if choice == "all":
        return present
    if choice == "specific":
        wanted = set(policy.specific.versions)
        return [v for v in present if v in wanted]
    return present[: max(policy.latest.num_versions, 1)]


def missing_specific_versions(policy, available: Iterable[int]) -> list[int]:
    if policy.WhichOneof("policy_choice") != "specific":
        return []
    present = set(available)
    return sorted(v for v in set(policy.specific.versions) if v not in present)
