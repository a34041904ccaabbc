"""The ``fleet:`` section: read from YAML, the environment and flags like
every section, each field judged with the file named, and the settings it
cannot work without (``mqtt``, poll mode) checked across the whole."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from edgebox.fleet.settings import FleetSettings
from edgebox.settings import Settings, SettingsError, load_settings
from edgebox.settings import loader as settings_module
from field_docstrings import documented_fields


@pytest.fixture(autouse=True)
def no_default_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "DEFAULT_CONFIG_FILE", tmp_path / "absent.yaml")


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """A file standing in for a public key: the section only opens it."""
    path = tmp_path / "release.pub"
    path.write_text("not parsed here\n", encoding="utf-8")
    return path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "edgebox.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(**kwargs) -> str:
    kwargs.setdefault("flags", {})
    kwargs.setdefault("environ", {})
    with pytest.raises(SettingsError) as info:
        load_settings(**kwargs)
    return str(info.value)


def test_every_field_has_a_docstring() -> None:
    assert documented_fields(FleetSettings) == {f.name for f in dataclasses.fields(FleetSettings)}


def test_absent_fleet_section_means_no_agent() -> None:
    assert load_settings({}, environ={}).fleet is None
    assert Settings().fleet is None


def test_fleet_section_from_yaml_with_mqtt_and_poll_mode(tmp_path: Path, key_file: Path) -> None:
    other = tmp_path / "next.pub"
    other.write_text("x", encoding="utf-8")
    config = write(
        tmp_path,
        "mqtt:\n  url: mqtt://broker\n"
        f"fleet:\n  group: line-3\n  trusted_keys: [{key_file}, {other}]\n"
        "  artifact_max_mb: 64\n",
    )
    fleet = load_settings({}, config_file=config, environ={}).fleet
    assert fleet == FleetSettings(
        group="line-3", trusted_keys=(key_file, other), artifact_max_mb=64.0
    )
    assert fleet.download_dir == Path("/var/lib/edgebox/fleet")
    assert fleet.ca_file is None
    assert fleet.artifact_max_bytes == 64 * 1024 * 1024


def test_environment_and_flags_set_fields_and_lists_split_on_commas(
    tmp_path: Path, key_file: Path
) -> None:
    other = tmp_path / "next.pub"
    other.write_text("x", encoding="utf-8")
    loaded = load_settings(
        {"fleet_artifact_max_mb": "8", "fleet_download_dir": str(tmp_path / "dl")},
        environ={
            "EDGEBOX_MQTT_URL": "mqtt://broker",
            "EDGEBOX_FLEET_GROUP": "dock",
            "EDGEBOX_FLEET_TRUSTED_KEYS": f"{key_file},{other}",
        },
    )
    assert loaded.fleet == FleetSettings(
        group="dock",
        trusted_keys=(key_file, other),
        artifact_max_mb=8.0,
        download_dir=tmp_path / "dl",
    )
    assert all(isinstance(path, Path) for path in loaded.fleet.trusted_keys)
    assert loaded.sources["fleet.trusted_keys"] == "EDGEBOX_FLEET_TRUSTED_KEYS"
    assert loaded.sources["fleet.artifact_max_mb"] == "--fleet-artifact-max-mb"


def test_a_missing_group_and_no_keys_are_each_named(tmp_path: Path) -> None:
    config = write(tmp_path, "mqtt:\nfleet:\n  artifact_max_mb: 1\n")
    message = load_error(config_file=config)
    assert (
        "setting 'fleet.group' (default): required: the fleet group whose desired state "
        "this device follows" in message
    )
    assert "setting 'fleet.trusted_keys' (default): needs at least one public key file" in message


@pytest.mark.parametrize("group", ["line/3", "+", "-dash-first", "a" * 65, "line 3"])
def test_a_group_that_is_not_one_topic_level_is_refused(key_file: Path, group: str) -> None:
    message = load_error(
        environ={
            "EDGEBOX_MQTT_URL": "mqtt://broker",
            "EDGEBOX_FLEET_GROUP": group,
            "EDGEBOX_FLEET_TRUSTED_KEYS": str(key_file),
        }
    )
    assert message == (
        "setting 'fleet.group' from EDGEBOX_FLEET_GROUP: expected 1-64 letters, digits, "
        f"'_', '.' or '-' (starting with a letter or digit), got {group!r}"
    )


def test_an_unreadable_key_file_is_named_with_its_line(tmp_path: Path, key_file: Path) -> None:
    missing = tmp_path / "gone.pub"
    config = write(
        tmp_path,
        f"mqtt:\nfleet:\n  group: g\n  trusted_keys:\n    - {key_file}\n    - {missing}\n",
    )
    with pytest.raises(SettingsError) as info:
        load_settings({}, config_file=config, environ={})
    (problem,) = info.value.problems
    assert problem.setting == "fleet.trusted_keys"
    assert problem.detail == f"cannot read '{missing}': No such file or directory"
    assert problem.line == 4


def test_a_folder_given_as_key_or_ca_file_is_refused(tmp_path: Path, key_file: Path) -> None:
    message = load_error(
        environ={
            "EDGEBOX_MQTT_URL": "mqtt://broker",
            "EDGEBOX_FLEET_GROUP": "g",
            "EDGEBOX_FLEET_TRUSTED_KEYS": f"{key_file},{tmp_path}",
            "EDGEBOX_FLEET_CA_FILE": str(tmp_path),
        }
    )
    assert f"'fleet.trusted_keys' from EDGEBOX_FLEET_TRUSTED_KEYS: cannot read '{tmp_path}'" in (
        message
    )
    assert f"'fleet.ca_file' from EDGEBOX_FLEET_CA_FILE: cannot read '{tmp_path}'" in message


@pytest.mark.parametrize("size", ["0", "-1", "nan", "inf"])
def test_artifact_max_mb_must_be_a_positive_number(key_file: Path, size: str) -> None:
    message = load_error(
        flags={"fleet_artifact_max_mb": size},
        environ={
            "EDGEBOX_MQTT_URL": "mqtt://broker",
            "EDGEBOX_FLEET_GROUP": "g",
            "EDGEBOX_FLEET_TRUSTED_KEYS": str(key_file),
        },
    )
    assert message.startswith("setting 'fleet.artifact_max_mb' from --fleet-artifact-max-mb: ")
    assert "expected" in message


def test_a_download_dir_that_is_a_file_is_refused(key_file: Path) -> None:
    fleet = FleetSettings(group="g", trusted_keys=(key_file,), download_dir=key_file)
    assert list(fleet.problems()) == [("download_dir", f"'{key_file}' exists and is not a folder")]


def test_fleet_without_mqtt_is_refused_naming_where_fleet_was_given(
    tmp_path: Path, key_file: Path
) -> None:
    config = write(tmp_path, f"fleet:\n  group: g\n  trusted_keys: [{key_file}]\n")
    with pytest.raises(SettingsError) as info:
        load_settings({}, config_file=config, environ={})
    (problem,) = info.value.problems
    assert problem.message == (
        f"setting 'fleet' ({config}): needs the mqtt section: the desired state arrives "
        "over MQTT, and the device id and broker come from mqtt"
    )
    assert (problem.file, problem.line) == (str(config), 2)


@pytest.mark.parametrize("mode", ["none", "explicit"])
def test_fleet_needs_poll_mode(key_file: Path, mode: str) -> None:
    message = load_error(
        flags={"model_control_mode": mode},
        environ={
            "EDGEBOX_MQTT_URL": "mqtt://broker",
            "EDGEBOX_FLEET_GROUP": "g",
            "EDGEBOX_FLEET_TRUSTED_KEYS": str(key_file),
        },
    )
    assert message == (
        "setting 'fleet' (EDGEBOX_FLEET_GROUP): needs model_control_mode poll: the agent "
        f"publishes versions into the repository and poll mode loads them, got '{mode}'"
    )
