"""Whether an engine was built for this TensorRT and this device, and what to
say when it was not.

A serialized engine only loads into the TensorRT version and the GPU (compute
capability) that built it. Asked anyway, TensorRT logs an error and
``deserialize_cuda_engine`` returns None, which other servers turn into a
crash or "failed to load". Two sources tell edgebox more:

1. ``engine_build.json`` next to ``model.plan``, written by
   ``edgebox build-engine``: compared before deserializing, so the reason names
   both TensorRT versions and both devices. Its keys are declared here, once
   (``EngineBuildRecord``), for the command that writes them too;
2. without it, the errors TensorRT logs while deserializing ("Version tag does
   not match", "expecting library version X got Y", "expecting compute X got
   compute Y"), put into the reason with ``tensorrt.__version__``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from edgebox.errors import Unavailable

SIDECAR_FILENAME = "engine_build.json"

PRECISIONS = ("fp32", "fp16", "int8")


@dataclass(frozen=True)
class EngineBuildRecord:
    """``engine_build.json`` as ``edgebox build-engine`` writes it, every key
    present; ``EngineBuildInfo`` is the same keys as a load reads them."""

    tensorrt_version: str
    """``tensorrt.__version__`` at build time, e.g. "8.6.2.3"."""
    device_name: str
    """The CUDA device name as pycuda reports it, e.g. "Orin"."""
    compute_capability: str
    """"major.minor", e.g. "8.7" for Orin."""
    dla_core: int | None
    """The DLA core the engine was built for; None for a GPU-only engine."""
    gpu_fallback: bool
    precision: str
    """"fp32", "fp16" or "int8": the lowest precision the build allowed."""
    onnx_sha256: str
    built_at: str
    """ISO 8601 in UTC, e.g. "2025-05-01T09:30:00Z"."""
    edgebox_version: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> EngineBuildRecord:
        """ValueError (json.JSONDecodeError is one) names what is missing or wrong."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in data]
        if missing:
            raise ValueError(f"missing keys: {', '.join(missing)}")
        problem = _dla_core_problem(data["dla_core"])
        if problem is not None:
            raise ValueError(problem)
        record = cls(**{name: data[name] for name in names})
        if record.precision not in PRECISIONS:
            raise ValueError(f"precision '{record.precision}' is not one of {PRECISIONS}")
        return record


def read_record(version_dir: Path) -> EngineBuildRecord | None:
    """The complete record in a version folder, or None when it is absent,
    unreadable or incomplete (an engine published by hand, or by an older
    edgebox): what ``edgebox build-engine`` may reuse a calibration from."""
    try:
        return EngineBuildRecord.from_json((version_dir / SIDECAR_FILENAME).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class EngineBuildInfo:
    """What ``edgebox build-engine`` recorded (``EngineBuildRecord``'s keys),
    as a load reads it: every field may be missing."""

    path: Path
    tensorrt_version: str | None = None
    device_name: str | None = None
    compute_capability: str | None = None
    dla_core: int | None = None
    gpu_fallback: bool | None = None
    precision: str | None = None
    onnx_sha256: str | None = None
    built_at: str | None = None
    edgebox_version: str | None = None


@dataclass(frozen=True)
class DeviceInfo:
    """The GPU an instance runs on, as the CUDA driver names it."""

    name: str
    compute_capability: str
    """``"8.7"`` for an Orin."""


def read_build_info(version_dir: Path) -> EngineBuildInfo | None:
    """The version folder's ``engine_build.json``; None when there is none.
    Unavailable (naming the file) when it cannot be read as the agreed JSON."""
    path = version_dir / SIDECAR_FILENAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unavailable(f"cannot read '{path}': {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unavailable(f"'{path}' is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise Unavailable(f"'{path}' must hold a JSON object, not {type(data).__name__}")
    dla_core = data.get("dla_core")
    problem = _dla_core_problem(dla_core)
    if problem is not None:
        raise Unavailable(f"'{path}': {problem}")

    def text_of(key: str) -> str | None:
        value = data.get(key)
        return None if value is None else str(value)

    fallback = data.get("gpu_fallback")
    return EngineBuildInfo(
        path=path,
        tensorrt_version=text_of("tensorrt_version"),
        device_name=text_of("device_name"),
        compute_capability=text_of("compute_capability"),
        dla_core=dla_core,
        gpu_fallback=None if fallback is None else bool(fallback),
        precision=text_of("precision"),
        onnx_sha256=text_of("onnx_sha256"),
        built_at=text_of("built_at"),
        edgebox_version=text_of("edgebox_version"),
    )


def _dla_core_problem(dla_core: object) -> str | None:
    if dla_core is not None and (isinstance(dla_core, bool) or not isinstance(dla_core, int)):
        return f"'dla_core' must be an integer or null, got {dla_core!r}"
    return None


def same_tensorrt_version(a: str, b: str) -> bool:
    """Equal as far as both are written: "8.6.2" matches "8.6.2.3"."""
    left, right = a.strip().split("."), b.strip().split(".")
    common = min(len(left), len(right))
    return common > 0 and left[:common] == right[:common]


def build_mismatch(
    info: EngineBuildInfo, model_path: Path, tensorrt_version: str, device: DeviceInfo
) -> str | None:
    """Why the engine cannot load here according to its sidecar, or None."""
    problems = []
    if info.tensorrt_version and not same_tensorrt_version(info.tensorrt_version, tensorrt_version):
        problems.append(
            f"'{model_path}' was built by TensorRT {info.tensorrt_version} ({info.path.name}), "
            f"but this is TensorRT {tensorrt_version}"
        )
    if info.compute_capability and info.compute_capability != device.compute_capability:
        built_on = f"'{info.device_name}'" if info.device_name else "another device"
        problems.append(
            f"'{model_path}' was built on {built_on} (compute capability "
            f"{info.compute_capability}), but this is '{device.name}' (compute capability "
            f"{device.compute_capability})"
        )
    if not problems:
        return None
    return "; ".join(problems) + "; rebuild the engine on this device with 'edgebox build-engine'"


def device_name_note(info: EngineBuildInfo, device: DeviceInfo) -> str | None:
    """Same compute capability, other device: it loads, but TensorRT chose its
    kernels by timing them on the other device."""
    if info.device_name and info.device_name != device.name:
        return (
            f"engine built on '{info.device_name}', running on '{device.name}' (same compute "
            f"capability {device.compute_capability}); its kernels were timed on the other device"
        )
    return None


def dla_problem(
    dla_core: int | None, dla_cores_here: int, device: DeviceInfo, source: str
) -> str | None:
    """Why ``dla_core`` cannot be used on this device, or None. ``source`` says
    where the core number came from (the config line or the sidecar)."""
    if dla_core is None:
        return None
    if dla_core < 0:
        return f"DLA core {dla_core} ({source}) is not a DLA core number"
    if dla_cores_here == 0:
        return (
            f"the engine is meant for DLA core {dla_core} ({source}), but '{device.name}' has no "
            "DLA cores (Orin Nano has none; AGX Orin and Orin NX have 2)"
        )
    if dla_core >= dla_cores_here:
        return (
            f"the engine is meant for DLA core {dla_core} ({source}), but '{device.name}' has "
            f"only {dla_cores_here} DLA core(s) (0 to {dla_cores_here - 1})"
        )
    return None


_LIBRARY_VERSION = re.compile(r"expecting library version (\S+?),? got (\S+?)[,.]?(?:\s|$)")
_SERIALIZATION_TAG = re.compile(r"Current Version: (\d+), Serialized Engine Version: (\d+)")
_COMPUTE = re.compile(r"expecting compute (\S+?) got compute (\S+?)[,.]?(?:\s|$)")


def deserialize_failure(messages: Sequence[str], model_path: Path, tensorrt_version: str) -> str:
    """The reason for a ``deserialize_cuda_engine`` that returned None, from
    the errors TensorRT logged meanwhile."""
    text = " ".join(messages)
    findings = []
    if match := _LIBRARY_VERSION.search(text):
        findings.append(
            f"'{model_path}' was serialized by TensorRT {match.group(2)}, but this is TensorRT "
            f"{tensorrt_version}"
        )
    elif match := _SERIALIZATION_TAG.search(text):
        findings.append(
            f"'{model_path}' was serialized by another TensorRT version (serialization tag "
            f"{match.group(2)}; this TensorRT {tensorrt_version} writes {match.group(1)})"
        )
    if match := _COMPUTE.search(text):
        findings.append(
            f"'{model_path}' was built for compute capability {match.group(2)}, but this GPU "
            f"has {match.group(1)}"
        )
    if findings:
        summary = "; ".join(findings) + "; rebuild the engine on this device"
    else:
        summary = f"TensorRT {tensorrt_version} cannot deserialize '{model_path}'"
    said = " | ".join(m.strip() for m in messages if m.strip())
    detail = f" (TensorRT: {said})" if said else " (TensorRT logged no error on this thread)"
    return summary + detail
