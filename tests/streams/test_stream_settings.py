"""The ``streams`` setting: parsed from YAML or the environment, every
problem named by entry, key and source; the shipped example stays valid."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from edgebox.dashboard.settings import DashboardSettings
from edgebox.settings import Settings, SettingsError, load_settings
from edgebox.settings import loader as settings_module
from edgebox.streams.settings import StreamSettings
from field_docstrings import documented_fields

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_default_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "DEFAULT_CONFIG_FILE", tmp_path / "etc" / "edgebox.yaml")


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "edgebox.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error(tmp_path: Path, text: str) -> str:
    path = config(tmp_path, text)
    with pytest.raises(SettingsError) as info:
        load_settings({}, config_file=path, environ={})
    return str(info.value).replace(str(path), "FILE")


def test_no_streams_by_default():
    assert load_settings({}, environ={}).streams == ()


def test_streams_from_yaml_with_defaults_filled_in(tmp_path):
    path = config(
        tmp_path,
        "streams:\n"
        "  - {name: demo-road, source: 'synthetic:road', model: lane_pipeline, fps: 15}\n"
        "  - name: usb\n"
        "    source: 0\n"
        "    fps: 0\n"
        "    queue_frames: 3\n"
        "    in_flight: 1\n"
        "    log_interval_s: 2.5\n",
    )
    loaded = load_settings({}, config_file=path, environ={})
    assert loaded.streams == (
        StreamSettings(name="demo-road", source="synthetic:road", model="lane_pipeline", fps=15.0),
        StreamSettings(
            name="usb",
            source="0",
            model="lane_pipeline",
            fps=0.0,
            queue_frames=3,
            in_flight=1,
            log_interval_s=2.5,
        ),
    )
    assert loaded.sources["streams"] == str(path)


def test_mqtt_thinning_defaults_to_every_result_uncapped(tmp_path):
    path = config(
        tmp_path,
        "streams:\n"
        "  - {name: a, source: 0}\n"
        "  - {name: b, source: 1, results_every_n: 3, max_results_per_s: 2.5}\n",
    )
    first, second = load_settings({}, config_file=path, environ={}).streams
    assert (first.results_every_n, first.max_results_per_s) == (1, 0.0)
    assert (second.results_every_n, second.max_results_per_s) == (3, 2.5)


def test_streams_from_the_environment_as_yaml_text():
    loaded = load_settings(
        {}, environ={"EDGEBOX_STREAMS": "[{name: cam, source: /dev/video0, model: detector}]"}
    )
    assert loaded.streams == (StreamSettings(name="cam", source="/dev/video0", model="detector"),)
    assert loaded.sources["streams"] == "EDGEBOX_STREAMS"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "streams: {name: cam}\n",
            "setting 'streams' from FILE: expected a list of streams (each with name, source, "
            "model, fps), got {'name': 'cam'}",
        ),
        (
            "streams:\n",
            "setting 'streams' from FILE: expected a list of streams (each with name, source, "
            "model, fps), got None",
        ),
        (
            "streams: [cam]\n",
            "setting 'streams[0]' from FILE: expected a mapping with name, source, model, fps, "
            "got 'cam'",
        ),
        (
            "streams: ['rtsp://admin:s3cret@10.0.0.7/live']\n",
            "setting 'streams[0]' from FILE: expected a mapping with name, source, model, fps, "
            "got 'rtsp://admin:***@10.0.0.7/live'",
        ),
        (
            "streams: 'rtspsrc location=rtsp://cam/live user-id=admin user-pw=s3cret'\n",
            "setting 'streams' from FILE: expected a list of streams (each with name, source, "
            "model, fps), got 'rtspsrc location=rtsp://cam/live user-id=*** user-pw=***'",
        ),
        (
            "streams: [{name: cam, source: 0, fsp: 10}]\n",
            "setting 'streams[0]' from FILE: unknown key 'fsp'; did you mean 'fps'?",
        ),
        (
            "streams: [{name: cam, source: 0, colour: red}]\n",
            "setting 'streams[0]' from FILE: unknown key 'colour'",
        ),
        (
            "streams: [{name: cam}]\n",
            "setting 'streams[0]' from FILE: missing required key 'source'",
        ),
        (
            "streams: [{name: a, source: 0}, {source: 1}]\n",
            "setting 'streams[1]' from FILE: missing required key 'name'",
        ),
        (
            "streams: [{name: 'front cam', source: 0}]\n",
            "setting 'streams[0].name' from FILE: expected 1-64 letters, digits, '_', '.' or '-' "
            "(starting with a letter or digit), got 'front cam'",
        ),
        (
            "streams: [{name: a, source: 0}, {name: b, source: 1}, {name: a, source: 2}]\n",
            "setting 'streams[2].name' from FILE: stream name 'a' is already used by streams[0]",
        ),
        (
            "streams: [{name: cam, source: 'synthetic:river'}]\n",
            "setting 'streams[0].source' from FILE: unknown synthetic scene 'river'; known: road",
        ),
        (
            "streams: [{name: cam, source: ''}]\n",
            "setting 'streams[0].source' from FILE: is empty",
        ),
        (
            "streams: [{name: cam, source: 0, model: ''}]\n",
            "setting 'streams[0].model' from FILE: expected a model name, got ''",
        ),
        (
            "streams: [{name: cam, source: 0, fps: fast}]\n",
            "setting 'streams[0].fps' from FILE: expected a number >= 0 (0: no cap), got 'fast'",
        ),
        (
            "streams: [{name: cam, source: 0, fps: -1}]\n",
            "setting 'streams[0].fps' from FILE: expected a number >= 0 (0: no cap), got -1",
        ),
        (
            "streams: [{name: cam, source: 0, fps: .nan}]\n",
            "setting 'streams[0].fps' from FILE: expected a number >= 0 (0: no cap), got nan",
        ),
        (
            "streams: [{name: cam, source: 0, queue_frames: 0}]\n",
            "setting 'streams[0].queue_frames' from FILE: expected an integer 1..64, got 0",
        ),
        (
            "streams: [{name: cam, source: 0, queue_frames: 2.5}]\n",
            "setting 'streams[0].queue_frames' from FILE: expected an integer 1..64, got 2.5",
        ),
        (
            "streams: [{name: cam, source: 0, in_flight: 5}]\n",
            "setting 'streams[0].in_flight' from FILE: expected an integer 1..4, got 5",
        ),
        (
            "streams: [{name: cam, source: 0, in_flight: true}]\n",
            "setting 'streams[0].in_flight' from FILE: expected an integer 1..4, got True",
        ),
        (
            "streams: [{name: cam, source: 0, log_interval_s: 0}]\n",
            "setting 'streams[0].log_interval_s' from FILE: expected a number > 0, got 0",
        ),
        (
            "streams: [{name: cam, source: 0, results_every_n: 0}]\n",
            "setting 'streams[0].results_every_n' from FILE: expected an integer >= 1, got 0",
        ),
        (
            "streams: [{name: cam, source: 0, results_every_n: 1.5}]\n",
            "setting 'streams[0].results_every_n' from FILE: expected an integer >= 1, got 1.5",
        ),
        (
            "streams: [{name: cam, source: 0, max_results_per_s: -1}]\n",
            "setting 'streams[0].max_results_per_s' from FILE: expected a number >= 0 "
            "(0: no cap), got -1",
        ),
        (
            "streams: [{name: cam, source: 'rtsp://c/s', decode: fast}]\n",
            "setting 'streams[0].decode' from FILE: expected one of auto, hardware, software, "
            "got 'fast'",
        ),
        (
            "streams: [{name: cam, source: clip.mp4, decode: hardware}]\n",
            "setting 'streams[0].decode' from FILE: decode: hardware applies to network cameras "
            "(rtsp://); 'clip.mp4' is a video file, read as it is",
        ),
        (
            "streams: [{name: cam, source: 'https://u:pw@c/mjpeg', decode: hardware}]\n",
            "setting 'streams[0].decode' from FILE: decode: hardware is built for rtsp:// and "
            "rtsps:// cameras; 'https://u:***@c/mjpeg' decodes in software (decode: auto or "
            "software)",
        ),
        (
            "streams: [{name: cam, source: 'csi:0', decode: software}]\n",
            "setting 'streams[0].decode' from FILE: decode: software applies to network cameras "
            "(rtsp://); 'csi:0' is a CSI camera (its frames come from the ISP), read as it is",
        ),
        (
            "streams: [{name: cam, source: 'csi:16'}]\n",
            "setting 'streams[0].source' from FILE: CSI camera 'csi:16' needs a sensor id 0..15 "
            "after 'csi:' (e.g. csi:0?width=1920&height=1080&framerate=30)",
        ),
        (
            "streams: [{name: cam, source: 0, max_results_per_s: .inf}]\n",
            "setting 'streams[0].max_results_per_s' from FILE: expected a number >= 0 "
            "(0: no cap), got inf",
        ),
    ],
)
def test_bad_streams_name_the_entry_key_and_file(tmp_path, text, message):
    assert error(tmp_path, text) == message


def test_bad_yaml_in_the_environment_is_refused():
    with pytest.raises(SettingsError) as info:
        load_settings({}, environ={"EDGEBOX_STREAMS": "[{name: cam"})
    assert str(info.value) == (
        "setting 'streams' from EDGEBOX_STREAMS: not valid YAML: "
        "expected ',' or '}', but got '<stream end>'"
    )


def test_stream_settings_fields_have_docstrings():
    documented = documented_fields(StreamSettings)
    assert documented == {f.name for f in dataclasses.fields(StreamSettings)}


def test_shipped_config_example_is_valid_once_uncommented(tmp_path):
    lines = (ROOT / "etc" / "edgebox.yaml").read_text(encoding="utf-8").splitlines()
    start = lines.index("# streams:")
    example = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        example.append(line[2:])
    assert lines[start + len(example)] == "streams: []"
    loaded = load_settings({}, config_file=config(tmp_path, "\n".join(example)), environ={})
    assert [s.name for s in loaded.streams] == ["front", "dock", "usb"]
    assert loaded.streams[0].source.startswith("csi:0")


def test_demo_config_runs_the_synthetic_road_through_lane_pipeline():
    loaded = load_settings({}, config_file=ROOT / "etc" / "demo.yaml", environ={})
    assert loaded.streams == (
        StreamSettings(name="demo-road", source="synthetic:road", model="lane_pipeline", fps=15),
    )
    assert loaded.dashboard == DashboardSettings(anonymous_read=True)
    assert dataclasses.replace(loaded, streams=(), dashboard=DashboardSettings()) == Settings()
