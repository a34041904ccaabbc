"""NVIDIA's perf_analyzer, to load edgebox as Triton's users do
(``make perf-analyzer``; tests/e2e/test_perf_analyzer.py).

The binary ships in PyPI's ``tritonclient`` 2.41.0 wheel (the release the
field test used); it links ``libcudart.so.12`` even when no GPU is used, and
Debian's ``libb64.so.0d``. This takes the binary out of the wheel and the
CUDA runtime out of PyPI's ``nvidia-cuda-runtime-cu12`` into a folder of its
own (``.perf_analyzer/``, about 18 MB: 16 MB downloaded once), so the
project's venv keeps its own, newer tritonclient. ``libb64-0d`` comes from
apt (the Makefile target installs it).

    python scripts/perf_analyzer.py install     # once; prints the binary's path
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

TRITONCLIENT = "tritonclient==2.41.0"
CUDA_RUNTIME = "nvidia-cuda-runtime-cu12==12.9.79"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = ROOT / ".perf_analyzer"


class PerfAnalyzer:
    def __init__(self, home: Path = DEFAULT_HOME) -> None:
        self.home = Path(home)
        self.binary = self.home / "bin" / "perf_analyzer"
        self.lib = self.home / "lib"

    def installed(self) -> bool:
        return self.binary.exists() and (self.lib / "libcudart.so.12").exists()

    def install(self) -> Path:
        """Idempotent; returns the binary."""
        if self.installed():
            return self.binary
        with tempfile.TemporaryDirectory() as folder:
            downloads = Path(folder)
            _extract(_download(TRITONCLIENT, downloads), "/bin/perf_analyzer", self.binary.parent)
            _extract(_download(CUDA_RUNTIME, downloads), "/lib/libcudart.so.12", self.lib)
        self.binary.chmod(0o755)
        return self.binary

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = f"{self.lib}:{env.get('LD_LIBRARY_PATH', '')}"
        return env

    def unusable(self) -> str | None:
        """Why the binary cannot run here (not installed, a library the loader
        cannot find), or None when it runs."""
        if not self.installed():
            return f"perf_analyzer is not installed in {self.home}: run `make perf-analyzer`"
        try:
            check = subprocess.run(
                [str(self.binary), "--version"],
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError as exc:
            return f"{self.binary} does not run here: {exc}"
        if check.returncode != 0:
            reason = (check.stderr or check.stdout).strip().splitlines()
            return f"{self.binary} does not run here: {reason[-1] if reason else check.returncode}"
        return None

    def run(self, args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.binary), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )


def report_rows(path: Path) -> list[dict[str, float]]:
    """The rows of perf_analyzer's ``-f`` CSV, one per load level (a
    concurrency or a request rate), numbers as floats. Only the first table:
    anything after a blank line (the metrics table ``--collect-metrics``
    adds) is left out."""
    text = Path(path).read_text()
    table = text.split("\n\n", 1)[0]
    return [
        {key: float(value) for key, value in row.items() if key and value}
        for row in csv.DictReader(table.splitlines())
    ]


_REQUEST_COUNT = re.compile(r"^\s*Request count: (\d+)\s*$", re.MULTILINE)


def client_request_counts(output: str) -> list[int]:
    """The client's ``Request count`` of each load level in perf_analyzer's
    report: the requests it measured (warm-up and trials before the stable
    windows are sent too, so a server counts at least their sum)."""
    return [int(count) for count in _REQUEST_COUNT.findall(output)]


def _download(requirement: str, folder: Path) -> Path:
    """The wheel pip picks for this machine (no dependencies)."""
    before = set(folder.glob("*.whl"))
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder)]
    subprocess.run([*command, requirement], check=True)
    (wheel,) = set(folder.glob("*.whl")) - before
    return wheel


def _extract(wheel: Path, suffix: str, folder: Path) -> None:
    """The one member of ``wheel`` whose path ends with ``suffix``, into ``folder``."""
    with zipfile.ZipFile(wheel) as archive:
        found = [name for name in archive.namelist() if name.endswith(suffix)]
        if not found:
            raise FileNotFoundError(f"{wheel.name} holds no {suffix.lstrip('/')}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / Path(found[0]).name).write_bytes(archive.read(found[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["install"])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    args = parser.parse_args(argv)
    print(PerfAnalyzer(args.home).install())
    return 0


if __name__ == "__main__":
    sys.exit(main())
