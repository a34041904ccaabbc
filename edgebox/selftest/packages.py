"""CUDA and cuDNN as JetPack installs them: Debian packages, read from dpkg's
own database under ``root`` (``var/lib/dpkg/status``) rather than by loading
the libraries, so a broken library is reported, not crashed into, and
fixture trees can describe a device."""

from __future__ import annotations

from pathlib import Path

from edgebox.selftest.report import Check, Status

SECTION = "platform"


def installed_packages(root: Path) -> dict[str, str]:
    """Package name -> version, for the packages dpkg calls installed."""
    try:
        text = (root / "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return {}
    packages = {}
    for paragraph in text.split("\n\n"):
        fields = {}
        for line in paragraph.splitlines():
            if line[:1].isspace() or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            packages[fields["Package"]] = fields.get("Version", "")
    return packages


def _first(packages: dict[str, str], prefixes: tuple[str, ...]) -> tuple[str, str] | None:
    for name in sorted(packages):
        if name.startswith(prefixes) and not name.endswith(("-dev", "-samples", "-doc")):
            return name, packages[name]
    return None


def library_checks(root: Path, jetson: bool) -> list[Check]:
    packages = installed_packages(root)
    cuda = _first(packages, ("cuda-cudart-", "cuda-runtime-"))
    cudnn = _first(packages, ("libcudnn",))
    return [
        _check("CUDA", cuda, jetson, Status.FAIL, "TensorRT needs it: install JetPack's cuda"),
        _check("cuDNN", cudnn, jetson, Status.WARN, "only some TensorRT layers need it"),
    ]


def _check(
    name: str, found: tuple[str, str] | None, jetson: bool, missing: Status, why: str
) -> Check:
    if found is None:
        if jetson:
            return Check(SECTION, name, missing, f"no package installed; {why}")
        return Check(SECTION, name, Status.ABSENT, "not a Jetson")
    package, version = found
    facts = {"package": package, "version": version}
    if not jetson:
        return Check(SECTION, name, Status.ABSENT, f"not a Jetson ({package} {version})", facts)
    return Check(SECTION, name, Status.PASS, f"{version} ({package})", facts)
