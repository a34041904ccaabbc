"""The platform: which module and software this is, read the way the
daemon reads it (``telemetry``'s sysfs helpers, under ``root`` so tests use
fixture trees), and the libraries inference and cameras need.

On a Jetson (L4T's release file, or the iGPU's devfreq node) a missing
TensorRT or an OpenCV without GStreamer is a failure or a warning; anywhere
else they are "not on this machine", since the daemon serves there with
ONNX Runtime and software decode.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgebox.selftest.clocks import clocks_check
from edgebox.selftest.packages import library_checks
from edgebox.selftest.report import Check, Status
from edgebox.telemetry import choice, sysfs_source

SECTION = "platform"

Importer = Callable[[str], Any]
"""``importlib.import_module``, or a test's stand-in (None for "not installed")."""


def import_or_none(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def on_jetson(root: Path) -> bool:
    return sysfs_source.l4t_version(root) is not None or choice.looks_like_jetson(root)


def platform_checks(root: Path, importer: Importer = import_or_none) -> list[Check]:
    jetson = on_jetson(root)
    return [
        _module(root, jetson),
        _power_mode(root, jetson),
        clocks_check(root, jetson),
        _telemetry(root),
        *library_checks(root, jetson),
        _tensorrt(importer, jetson),
        _onnxruntime(importer),
        _opencv(importer, jetson),
    ]


def _module(root: Path, jetson: bool) -> Check:
    l4t = sysfs_source.l4t_version(root)
    model = sysfs_source.module_name(root)
    facts = {"model": model, "l4t": l4t, "jetpack": sysfs_source.JETPACK_OF_L4T.get(l4t or "")}
    if not jetson:
        return Check(SECTION, "module", Status.ABSENT, "not a Jetson (no L4T release)", facts)
    if l4t is None:
        return Check(
            SECTION,
            "module",
            Status.FAIL,
            f"{model or 'a Jetson'} without etc/nv_tegra_release: L4T unknown",
            facts,
        )
    jetpack = facts["jetpack"] or f"unknown for L4T {l4t}"
    return Check(SECTION, "module", Status.PASS, f"{model}, L4T {l4t}, JetPack {jetpack}", facts)


def _power_mode(root: Path, jetson: bool) -> Check:
    if not jetson:
        return Check(SECTION, "power mode", Status.ABSENT, "no nvpmodel")
    number = sysfs_source.power_mode_id(root)
    if number is None:
        return Check(SECTION, "power mode", Status.WARN, "nvpmodel's status is not readable")
    name = sysfs_source.power_mode_names(root).get(number, f"mode {number}")
    return Check(SECTION, "power mode", Status.PASS, name, {"id": number, "name": name})


def _telemetry(root: Path) -> Check:
    try:
        source = choice.open_source("auto", root)
    except Exception as error:  # a source that cannot start is the finding
        return Check(SECTION, "telemetry", Status.FAIL, f"no source can be read: {error}")
    try:
        name = source.name
    finally:
        source.close()
    status = Status.PASS if name != "psutil" or not on_jetson(root) else Status.WARN
    detail = name if status is Status.PASS else "psutil only: no GPU, power or DLA figures"
    return Check(SECTION, "telemetry", status, detail, {"source": name})


def _version(module: Any, distribution: str) -> str:
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _tensorrt(importer: Importer, jetson: bool) -> Check:
    tensorrt = importer("tensorrt")
    if tensorrt is None:
        if jetson:
            return Check(
                SECTION,
                "TensorRT",
                Status.FAIL,
                "not importable: install JetPack's python3-libnvinfer",
            )
        return Check(SECTION, "TensorRT", Status.ABSENT, "not installed (ONNX Runtime serves)")
    version = _version(tensorrt, "tensorrt")
    return Check(SECTION, "TensorRT", Status.PASS, version, {"version": version})


def _onnxruntime(importer: Importer) -> Check:
    ort = importer("onnxruntime")
    if ort is None:
        return Check(SECTION, "ONNX Runtime", Status.FAIL, "not importable")
    providers = list(ort.get_available_providers())
    version = _version(ort, "onnxruntime")
    return Check(
        SECTION,
        "ONNX Runtime",
        Status.PASS,
        f"{version}, providers {', '.join(providers)}",
        {"version": version, "providers": providers},
    )


def _opencv(importer: Importer, jetson: bool) -> Check:
    cv2 = importer("cv2")
    if cv2 is None:
        return Check(SECTION, "OpenCV", Status.FAIL, "not importable: cameras cannot be read")
    version = _version(cv2, "opencv-python-headless")
    gstreamer = gstreamer_built_in(cv2.getBuildInformation())
    facts = {"version": version, "gstreamer": gstreamer}
    if gstreamer:
        return Check(SECTION, "OpenCV", Status.PASS, f"{version}, with GStreamer", facts)
    detail = f"{version}, without GStreamer: cameras decode in software"
    return Check(SECTION, "OpenCV", Status.WARN if jetson else Status.PASS, detail, facts)


def gstreamer_built_in(build_information: str) -> bool:
    """``GStreamer: YES (1.20.3)`` under Video I/O in ``cv2.getBuildInformation()``."""
    match = re.search(r"^\s*GStreamer:\s*(\S+)", build_information, re.MULTILINE)
    return match is not None and match.group(1).upper().startswith("YES")
