"""debian/: the source package parses and agrees with the code and the unit."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename
from wheel_tags import runs_on

import edgebox
from edgebox.settings import Settings
from edgebox.settings.loader import DEFAULT_CONFIG_FILE

ROOT = Path(__file__).resolve().parents[2]
DEBIAN = ROOT / "debian"
BUILD_PRODUCTS = ("debian/wheels/",)
"""debian/rules makes these; every other source in debian/edgebox.install is in the tree."""


def parse_deb822(text: str) -> list[dict[str, str]]:
    """Paragraphs of 'Field: value' with continuation lines that start with
    whitespace; '#' lines are comments (allowed in debian/control)."""
    paragraphs: list[dict[str, str]] = []
    current: dict[str, str] = {}
    field = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                paragraphs.append(current)
            current, field = {}, None
            continue
        if line[0] in " \t":
            assert field is not None, f"line {number}: continuation without a field"
            current[field] += "\n" + line.strip()
            continue
        name, sep, value = line.partition(":")
        assert sep and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", name), f"line {number}: {line!r}"
        assert name not in current, f"line {number}: field {name} repeated"
        field = name
        current[name] = value.strip()
    if current:
        paragraphs.append(current)
    return paragraphs


def relations(value: str) -> dict[str, str]:
    """'a (>= 1), b, ${misc:Depends}' -> {'a': '>= 1', 'b': ''} (no alternatives here)."""
    result = {}
    for item in value.replace("\n", " ").split(","):
        item = item.strip()
        if not item or item.startswith("${"):
            continue
        match = re.fullmatch(r"([a-z0-9][a-z0-9+.-]+)\s*(?:\(([^)]*)\))?", item)
        assert match, f"cannot parse relation {item!r}"
        result[match.group(1)] = (match.group(2) or "").strip()
    return result


@pytest.fixture(scope="module")
def control() -> list[dict[str, str]]:
    return parse_deb822((DEBIAN / "control").read_text(encoding="utf-8"))


def test_parser_reads_continuations_and_paragraphs():
    parsed = parse_deb822("Source: a\nBuild-Depends: x,\n y\n\nPackage: a\n")
    assert parsed == [{"Source": "a", "Build-Depends": "x,\ny"}, {"Package": "a"}]


def test_control_has_the_source_and_one_binary_package(control):
    source, *binaries = control
    assert source["Source"] == "edgebox"
    assert [b["Package"] for b in binaries] == ["edgebox"]
    assert binaries[0]["Architecture"] == "arm64 amd64"
    assert "debhelper-compat" in relations(source["Build-Depends"])


def test_control_depends_on_the_python_the_wheelhouse_is_for(control):
    assert "${edgebox:Python}" in control[1]["Depends"]
    rules = (DEBIAN / "rules").read_text()
    assert (
        "'-Vedgebox:Python=python3 (>= $(EDGEBOX_PYTHON_VERSION)~), python3 (<< $(PYTHON_NEXT))'"
        in rules
    )
    assert "EDGEBOX_PYTHON_VERSION ?= 3.10\n" in rules
    depends = relations(control[1]["Depends"])
    assert "python3-venv" in depends
    assert "adduser" in depends
    assert "python3-libnvinfer" in relations(control[1]["Recommends"])


def test_control_description_names_the_unit(control):
    assert "edgebox.service" in control[1]["Description"]
    assert (DEBIAN / "edgebox.service").resolve() == (ROOT / "systemd/edgebox.service").resolve()


def test_changelog_version_matches_the_python_package():
    first = (DEBIAN / "changelog").read_text(encoding="utf-8").splitlines()[0]
    match = re.match(r"edgebox \((?P<upstream>[^)-]+)-(?P<revision>[^)]+)\) ", first)
    assert match, first
    assert match["upstream"] == edgebox.__version__


def test_source_format_and_license():
    assert (DEBIAN / "source/format").read_text().strip() == "3.0 (quilt)"
    assert "License: Apache-2.0" in (DEBIAN / "copyright").read_text(encoding="utf-8")


def test_install_file_sources_exist_and_the_config_lands_in_etc():
    destinations = {}
    for line in (DEBIAN / "edgebox.install").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        source, destination = line.split()
        destinations[source] = destination
        if not source.startswith(BUILD_PRODUCTS):
            assert glob.glob(str(ROOT / source)), f"debian/edgebox.install: {source} is missing"
    installed = Path("/") / destinations["etc/edgebox.yaml"] / "edgebox.yaml"
    assert installed == DEFAULT_CONFIG_FILE


def test_rules_is_an_executable_makefile():
    rules = DEBIAN / "rules"
    assert rules.read_text().startswith("#!/usr/bin/make -f\n")
    assert os.access(rules, os.X_OK)


@pytest.mark.parametrize("script", ["edgebox.postinst", "edgebox.postrm"])
def test_maintainer_scripts_are_valid_sh_with_the_debhelper_token(script):
    path = DEBIAN / script
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n") and "\n#DEBHELPER#\n" in text
    assert "\nset -e\n" in text
    assert os.access(path, os.X_OK)
    if shutil.which("sh"):
        subprocess.run(["sh", "-n", str(path)], check=True, timeout=30)


def test_postinst_manages_the_default_repository_and_the_unit_paths():
    postinst = (DEBIAN / "edgebox.postinst").read_text()
    assert f"MODELS_DIR={Settings().model_repository}\n" in postinst
    assert "OPT=/opt/edgebox\n" in postinst
    assert "--system-site-packages" in postinst
    link_target, link_name = (DEBIAN / "edgebox.links").read_text().split()
    assert "/" + link_target == "/opt/edgebox/venv/bin/edgebox"
    assert link_name == "usr/bin/edgebox"


def test_extra_requirements_ship_with_nothing_active():
    # Anything active here needs the network at install time, which an
    # appliance flashed offline does not have; the file only documents how
    # to add packages, and points at --onnxruntime-wheel for onnxruntime-gpu.
    lines = (ROOT / "etc" / "extra-requirements.txt").read_text().splitlines()
    active = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    assert active == []
    assert any("onnxruntime-gpu" in line for line in lines)
    assert any("--onnxruntime-wheel" in line for line in lines)


def test_constraints_keep_numpy_below_2():
    lines = (DEBIAN / "constraints.txt").read_text().splitlines()
    assert "numpy<2" in [line.strip() for line in lines]


def test_postinst_builds_the_virtualenv_offline_from_the_wheelhouse():
    postinst = (DEBIAN / "edgebox.postinst").read_text()
    assert "WHEELHOUSE=/usr/lib/edgebox/wheelhouse\n" in postinst
    offline, _, extra = postinst.partition('if [ -f "$EXTRA_REQUIREMENTS" ]')
    assert 'PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 "$NEW_VENV/bin/python" -m pip install' in offline
    assert '--no-index --find-links "$WHEELHOUSE"' in offline
    assert '"$wheel" "$WHEELHOUSE"/onnxruntime*.whl' in offline
    # Only a non-empty extra-requirements.txt reaches for the network.
    assert "--no-index" not in extra
    assert "(needs the network, or its wheels" in extra


def locked_versions() -> dict[str, str]:
    pins = {}
    for line in (DEBIAN / "wheelhouse.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and name == canonicalize_name(name), f"wheelhouse.lock: {line!r}"
            pins[name] = version
    return pins


def hashed_wheels() -> dict[str, str]:
    files = {}
    for line in (DEBIAN / "wheelhouse.sha256").read_text().splitlines():
        digest, filename = line.split()
        assert re.fullmatch(r"[0-9a-f]{64}", digest), line
        files[filename] = digest
    return files


def test_lock_pins_edgebox_dependencies_and_the_cpu_onnxruntime():
    pins = locked_versions()
    for name in ("numpy", "protobuf", "tritonclient", "grpcio", "httptools", "pyyaml",
                 "paho-mqtt", "flask", "waitress", "psutil", "prometheus-client", "onnxruntime"):
        assert name in pins, f"wheelhouse.lock pins no {name}"
    assert int(pins["numpy"].split(".")[0]) == 1, "constraints.txt keeps numpy below 2"
    assert "edgebox" not in pins and "onnxruntime-gpu" not in pins


def test_every_hashed_wheel_is_a_locked_version():
    pins = locked_versions()
    for filename in hashed_wheels():
        name, version, _, _ = parse_wheel_filename(filename)
        assert pins.get(name) == str(version), f"{filename} is not what wheelhouse.lock pins"


@pytest.mark.parametrize("python", ["3.10", "3.11"])
@pytest.mark.parametrize("arch", ["arm64", "amd64"])
def test_every_locked_version_has_a_hashed_wheel_for_the_target(arch, python):
    by_name: dict[str, list[str]] = {}
    for filename in hashed_wheels():
        by_name.setdefault(parse_wheel_filename(filename)[0], []).append(filename)
    for name, version in locked_versions().items():
        files = by_name.get(name, [])
        assert any(runs_on(filename, arch, python) for filename in files), (
            f"wheelhouse.sha256 has no {name} {version} wheel for {arch} CPython {python}: {files}"
        )


def _protect_config(tmp_path: Path, override: bool) -> tuple[int, str]:
    """The package's protect_config on a config under tmp_path, with chown and
    dpkg-statoverride stubbed (no edgebox group here); its mode and the chown
    asked for."""
    config = tmp_path / "edgebox.yaml"
    config.write_text("http_port: 8000\n")
    config.chmod(0o644)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "chown").write_text(f'#!/bin/sh\necho "$*" > {tmp_path}/chown\n')
    listed = "echo 'root root 0600 /etc/edgebox/edgebox.yaml'\n" if override else "exit 1\n"
    (stubs / "dpkg-statoverride").write_text("#!/bin/sh\n" + listed)
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    functions = (DEBIAN / "edgebox.postinst").read_text().partition('\ncase "$1" in')[0]
    script = tmp_path / "protect.sh"
    script.write_text(f"{functions}\nCONFIG={config}\nprotect_config\n")
    subprocess.run(["sh", str(script)], env={"PATH": f"{stubs}:/usr/bin:/bin"}, check=True,
                   timeout=30)
    chown = tmp_path / "chown"
    return config.stat().st_mode & 0o777, chown.read_text() if chown.exists() else ""


def test_postinst_makes_the_settings_file_unreadable_by_other_users(tmp_path):
    postinst = (DEBIAN / "edgebox.postinst").read_text()
    assert f"CONFIG={DEFAULT_CONFIG_FILE}\n" in postinst
    assert "        create_dirs\n        protect_config\n" in postinst
    mode, chown = _protect_config(tmp_path, override=False)
    assert (mode, chown) == (0o640, f"root:edgebox {tmp_path / 'edgebox.yaml'}\n")


def test_postinst_leaves_a_statoverride_of_the_settings_file_alone(tmp_path):
    assert _protect_config(tmp_path, override=True) == (0o644, "")
