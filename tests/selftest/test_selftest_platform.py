"""The platform checks on fixture trees of real Orin modules and on a
machine that is no Jetson: what is absent off a Jetson is "not on this
machine", never a pass, and on a Jetson a missing TensorRT fails."""

from __future__ import annotations

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
        "telemetry": Status.PASS,
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
