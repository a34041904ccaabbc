"""The platform checks on fixture trees of real Orin modules and on a
machine that is no Jetson: what is absent off a Jetson is "not on this
machine", never a pass, and on a Jetson a missing TensorRT fails."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

from edgebox.selftest.platform import gstreamer_built_in, platform_checks
from edgebox.selftest.report import Status

FIXTURES = Path(__file__).resolve().parent.parent / "telemetry" / "fixtures"
AGX_ORIN = FIXTURES / "agx_orin"

GSTREAMER_YES = """
  Video I/O:
    FFMPEG:                      YES
    GStreamer:                   YES (1.20.3)
"""
GSTREAMER_NO = GSTREAMER_YES.replace("YES (1.20.3)", "NO")


def fake_importer(**modules):
    """Stands in for ``importlib.import_module``: the named modules, None for the rest."""
    return lambda name: modules.get(name)


def fake_ort():
    return types.SimpleNamespace(
        __version__="1.16.3",
        get_available_providers=lambda: ["TensorrtExecutionProvider", "CPUExecutionProvider"],
    )


def fake_cv2(build: str):
    return types.SimpleNamespace(__version__="4.8.0", getBuildInformation=lambda: build)


def by_name(checks):
    return {check.name: check for check in checks}


def test_an_agx_orin_with_tensorrt_and_gstreamer_passes_and_names_its_module():
    checks = by_name(
        platform_checks(
            AGX_ORIN,
            fake_importer(
                tensorrt=types.SimpleNamespace(__version__="10.3.0"),
                onnxruntime=fake_ort(),
                cv2=fake_cv2(GSTREAMER_YES),
            ),
        )
    )
    assert {name: check.status for name, check in checks.items()} == {
        "module": Status.PASS,
        "power mode": Status.PASS,
        "clocks": Status.PASS,
        "telemetry": Status.PASS,
        "CUDA": Status.PASS,
        "cuDNN": Status.PASS,
        "TensorRT": Status.PASS,
        "ONNX Runtime": Status.PASS,
        "OpenCV": Status.PASS,
    }
    model = (AGX_ORIN / "proc/device-tree/model").read_text().strip("\0\n ")
    assert checks["module"].detail.startswith(model)
    assert "L4T 36." in checks["module"].detail
    assert checks["TensorRT"].detail == "10.3.0"
    assert checks["ONNX Runtime"].facts["providers"][0] == "TensorrtExecutionProvider"
    assert checks["telemetry"].facts["source"] == "sysfs"
    assert checks["CUDA"].detail == "12.2.140-1 (cuda-cudart-12-2)"
    assert checks["cuDNN"].detail == "8.9.4.25-1+cuda12.2 (libcudnn8)"
    assert checks["clocks"].detail == (
        "CPU 11 cores online at 1100-2100 MHz of 2202; GPU at 1300 MHz of 1300; "
        "scaling (jetson_clocks off)"
    )


def test_on_a_jetson_a_missing_tensorrt_fails_and_software_decode_warns():
    checks = by_name(
        platform_checks(AGX_ORIN, fake_importer(onnxruntime=fake_ort(), cv2=fake_cv2(GSTREAMER_NO)))
    )
    assert checks["TensorRT"].status is Status.FAIL
    assert "python3-libnvinfer" in checks["TensorRT"].detail
    assert checks["OpenCV"].status is Status.WARN
    assert "software" in checks["OpenCV"].detail


def test_off_a_jetson_what_needs_one_is_not_on_this_machine(tmp_path):
    (tmp_path / "proc").mkdir()
    checks = by_name(
        platform_checks(tmp_path, fake_importer(onnxruntime=fake_ort(), cv2=fake_cv2(GSTREAMER_NO)))
    )
    for name in ("module", "power mode", "TensorRT"):
        assert checks[name].status is Status.ABSENT, name
    assert checks["OpenCV"].status is Status.PASS
    assert checks["telemetry"].facts["source"] == "psutil"


def test_without_onnxruntime_or_opencv_the_checks_fail(tmp_path):
    checks = by_name(platform_checks(tmp_path, fake_importer()))
    assert checks["ONNX Runtime"].status is Status.FAIL
    assert checks["OpenCV"].status is Status.FAIL


def test_gstreamer_is_read_from_opencvs_build_information():
    assert gstreamer_built_in(GSTREAMER_YES)
    assert not gstreamer_built_in(GSTREAMER_NO)
    assert not gstreamer_built_in("Video I/O:\n    FFMPEG: YES\n")


def copy_of(tree: Path, into: Path) -> Path:
    shutil.copytree(tree, into, symlinks=True)
    return into


def test_clocks_pinned_by_jetson_clocks_are_said_so(tmp_path):
    root = copy_of(AGX_ORIN, tmp_path / "orin")
    for folder in (root / "sys/devices/system/cpu").glob("cpu*/cpufreq"):
        (folder / "scaling_min_freq").write_text("2201600\n")
    (root / "sys/class/devfreq/17000000.gpu/min_freq").write_text("1300500000\n")
    check = by_name(platform_checks(root, fake_importer()))["clocks"]
    assert (check.status, check.facts["pinned"]) == (Status.PASS, True)
    assert check.detail.endswith("; jetson_clocks on")


def test_on_a_jetson_missing_cuda_fails_and_missing_cudnn_warns(tmp_path):
    root = copy_of(AGX_ORIN, tmp_path / "orin")
    (root / "var/lib/dpkg/status").write_text(
        "Package: libcudnn8\nStatus: deinstall ok config-files\nVersion: 8.9\n"
    )
    checks = by_name(platform_checks(root, fake_importer()))
    assert checks["CUDA"].status is Status.FAIL
    assert checks["cuDNN"].status is Status.WARN, "a removed package is not installed"


def test_off_a_jetson_clocks_cuda_and_cudnn_are_not_on_this_machine(tmp_path):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(
        "Package: cuda-cudart-13-0\nStatus: install ok installed\nVersion: 13.0.48-1\n"
    )
    checks = by_name(platform_checks(tmp_path, fake_importer()))
    assert [checks[name].status for name in ("clocks", "CUDA", "cuDNN")] == [Status.ABSENT] * 3
    assert checks["CUDA"].detail == "not a Jetson (cuda-cudart-13-0 13.0.48-1)"
