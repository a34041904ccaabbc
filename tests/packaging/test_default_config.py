"""etc/edgebox.yaml, shipped as /etc/edgebox/edgebox.yaml: loads through the
real settings code, lists every setting, and holds the built-in defaults
(which are the appliance's: poll mode every 2 s, /var/lib/edgebox/models).
Sections that would turn something on (``mqtt``, ``fleet``) are shipped
commented out, whole: uncommented, they load and hold every field at its
default, or (``fleet``, whose group and keys have none) the example values."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from edgebox.fleet.settings import FleetSettings
from edgebox.fleet.signing import generate_key
from edgebox.mqtt.settings import MqttSettings
from edgebox.settings import SECTIONS, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "etc" / "edgebox.yaml"
COMMENTED_OUT = {"mqtt": MqttSettings}
"""Sections shipped commented out: present, they would turn a feature on."""
COMMENTED_EXAMPLES = {"fleet": FleetSettings}
"""Sections shipped commented out with example values for fields that have no default."""
FIELDS = [
    f.name
    for f in dataclasses.fields(Settings)
    if f.name not in COMMENTED_OUT and f.name not in COMMENTED_EXAMPLES
]
APPLIANCE_DIFFERS: dict[str, object] = {}
"""Settings the shipped file sets away from the built-in default (none today)."""


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings({}, config_file=CONFIG, environ={})


def test_loads_into_valid_settings(settings):
    assert isinstance(settings, Settings)
    expected = {}
    for name in FIELDS:
        if name in SECTIONS:  # a section on by default lists its fields
            expected |= {
                f"{name}.{f.name}": str(CONFIG) for f in dataclasses.fields(SECTIONS[name])
            }
        else:
            expected[name] = str(CONFIG)
    assert settings.sources == expected


def test_lists_exactly_the_settings_fields():
    keys = list(yaml.safe_load(CONFIG.read_text(encoding="utf-8")))
    assert sorted(keys) == sorted(FIELDS)
    assert len(keys) == len(set(keys))


def test_values_are_the_defaults_except_the_appliance_choices(settings):
    defaults = Settings()
    differing = {
        name: getattr(settings, name)
        for name in FIELDS
        if getattr(settings, name) != getattr(defaults, name)
    }
    assert differing == APPLIANCE_DIFFERS
    # What the appliance needs, whether or not the built-in defaults change.
    assert settings.model_control_mode == "poll"
    assert settings.repository_poll_secs == 2.0
    assert settings.model_repository == Path("/var/lib/edgebox/models")


def test_every_setting_has_a_comment():
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    key_line = re.compile(r"^([a-z_]+):")
    uncommented = []
    for index, line in enumerate(lines):
        match = key_line.match(line)
        if not match:
            continue
        # Walk up over the keys of the same group to the comment above them.
        above = index - 1
        while above >= 0 and key_line.match(lines[above]):
            above -= 1
        if above < 0 or not lines[above].startswith("#"):
            uncommented.append(match.group(1))
    assert not uncommented, f"settings without a comment above them: {uncommented}"


def commented_section(name: str) -> list[str]:
    """The lines of the commented-out ``# name:`` block, uncommented."""
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"# {name}:")
    block = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        block.append(line.removeprefix("#").removeprefix(" "))
    return block


@pytest.mark.parametrize("name", sorted(COMMENTED_OUT))
def test_commented_out_section_lists_every_field_at_its_default(tmp_path, name):
    section = commented_section(name)
    path = tmp_path / "section.yaml"
    path.write_text("\n".join(section) + "\n", encoding="utf-8")
    keys = list(yaml.safe_load(path.read_text(encoding="utf-8"))[name])
    assert keys == [f.name for f in dataclasses.fields(COMMENTED_OUT[name])]
    loaded = load_settings({}, config_file=path, environ={})
    assert getattr(loaded, name) == COMMENTED_OUT[name]()


def test_commented_out_fleet_section_lists_every_field_and_loads_with_its_examples(tmp_path):
    section = commented_section("fleet")
    key = generate_key(tmp_path / "release")
    text = "\n".join(section).replace("/etc/edgebox/fleet/release.pub", str(key))
    path = tmp_path / "section.yaml"
    path.write_text("mqtt:\n" + text + "\n", encoding="utf-8")
    keys = list(yaml.safe_load(path.read_text(encoding="utf-8"))["fleet"])
    assert keys == [f.name for f in dataclasses.fields(FleetSettings)]
    loaded = load_settings({}, config_file=path, environ={})
    assert loaded.fleet == FleetSettings(group="line-3", trusted_keys=(key,))


@pytest.mark.parametrize("name", sorted({**COMMENTED_OUT, **COMMENTED_EXAMPLES}))
def test_commented_out_section_has_a_comment_for_every_field(name):
    section = commented_section(name)
    key_line = re.compile(r"^  ([a-z_]+):")
    uncommented = []
    for index, line in enumerate(section):
        match = key_line.match(line)
        if not match:
            continue
        above = index - 1
        while above >= 0 and key_line.match(section[above]):
            above -= 1
        if above < 0 or not section[above].lstrip().startswith("#"):
            uncommented.append(match.group(1))
    assert not uncommented, f"{name} fields without a comment above them: {uncommented}"


def test_shipped_file_leaves_commented_out_sections_off(settings):
    for name in {**COMMENTED_OUT, **COMMENTED_EXAMPLES}:
        assert getattr(settings, name) is None


def test_environment_still_overrides_the_file():
    settings = load_settings({}, config_file=CONFIG, environ={"EDGEBOX_LOG_VERBOSE": "1"})
    assert settings.log_verbose == 1
    assert settings.sources["log_verbose"] == "EDGEBOX_LOG_VERBOSE"
