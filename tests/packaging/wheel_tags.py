"""Which wheel files run on one target of the .deb: an architecture (arm64 or
amd64) and a CPython minor version, on glibc up to 2.35 (Ubuntu 22.04, the
base of JetPack 6), the same targets scripts/build_deb.sh downloads for."""

from __future__ import annotations

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

MACHINES = {"arm64": "aarch64", "amd64": "x86_64"}
GLIBC_MINOR_MAX = 35


def target_tags(arch: str, python: str) -> set[Tag]:
    """Every wheel tag pip accepts for ARCH and CPython PYTHON ('3.10'), no more:
    manylinux up to glibc 2.35 (with its legacy aliases), abi3, pure Python."""
    machine = MACHINES[arch]
    platforms = [f"manylinux_2_{minor}_{machine}" for minor in range(GLIBC_MINOR_MAX, 4, -1)]
    platforms.append(f"manylinux2014_{machine}")
    if machine == "x86_64":
        platforms += ["manylinux2010_x86_64", "manylinux1_x86_64"]
    version = tuple(int(part) for part in python.split("."))
    interpreter = f"cp{version[0]}{version[1]}"
    tags = set(cpython_tags(version, abis=[interpreter], platforms=platforms))
    tags |= set(compatible_tags(version, interpreter=interpreter, platforms=platforms))
    return tags


def runs_on(filename: str, arch: str, python: str) -> bool:
    """True if the wheel FILENAME installs on ARCH with CPython PYTHON."""
    return bool(parse_wheel_filename(filename)[3] & target_tags(arch, python))
