"""A real Triton 2.51 to compare edgebox with (``make test-parity``).

PyPI's ``nvidia-pytriton`` wheel ships the ``tritonserver`` binary with the
python backend and ensembles (no ONNX Runtime backend), for x86-64 and
aarch64. This installs it into a virtual environment of its own (``.parity/``
by default: it is 400 MB and the project's venv must not depend on it), lays
out a backend directory with the python stub for this interpreter, and
launches the server as PyTriton does: the stub runs ``model.py`` with the
first ``python3`` on PATH, so the venv's ``bin`` goes first.

    python scripts/triton_reference.py install      # once; prints the server's path
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

PYTRITON = "nvidia-pytriton==0.7.0"
"""Ships tritonserver 2.51.0."""
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = ROOT / ".parity"


class Reference:
    def __init__(self, home: Path = DEFAULT_HOME) -> None:
        self.home = Path(home)
        self.venv = self.home / "venv"
        self.dist = self.home / "dist"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def installed(self) -> bool:
        return (self.dist / "bin" / "tritonserver").exists()

    def install(self) -> Path:
        """Idempotent; returns the ``tritonserver`` binary."""
        if self.installed():
            return self.dist / "bin" / "tritonserver"
        if not self.python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        subprocess.run(
            [str(self.python), "-m", "pip", "install", "-q", PYTRITON, "numpy"], check=True
        )
        package = self._package()
        if self.dist.exists():
            shutil.rmtree(self.dist)
        self.dist.mkdir(parents=True)
        for part in ("bin", "backends", "caches"):
            shutil.copytree(package / part, self.dist / part, symlinks=True)
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        stub = package / "python_backend_stubs" / version / "triton_python_backend_stub"
        shutil.copy2(stub, self.dist / "backends" / "python" / stub.name)
        return self.dist / "bin" / "tritonserver"

    def launch(
        self,
        repository: Path,
        http_port: int,
        grpc_port: int,
        metrics_port: int,
        log: Path,
        extra_args: Sequence[str] = (),
    ) -> subprocess.Popen:
        """The server on 127.0.0.1, explicit model control off (it loads the
        whole repository, as edgebox's default poll mode does at start);
        ``extra_args`` follow the usual flags (``--cache-config local,size=N``:
        the wheel ships Triton's local cache)."""
        env = dict(os.environ)
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '')}"
        libs = self._package().parent.parent / "nvidia_pytriton.libs"
        env["LD_LIBRARY_PATH"] = f"{libs}:{env.get('LD_LIBRARY_PATH', '')}"
        command = [
            str(self.dist / "bin" / "tritonserver"),
            "--model-repository",
            str(repository),
            "--http-address",
            "127.0.0.1",
            "--http-port",
            str(http_port),
            "--grpc-address",
            "127.0.0.1",
            "--grpc-port",
            str(grpc_port),
            "--metrics-address",
            "127.0.0.1",
            "--metrics-port",
            str(metrics_port),
            "--backend-directory",
            str(self.dist / "backends"),
            "--cache-directory",
            str(self.dist / "caches"),
            "--backend-config",
            f"python,shm-region-prefix-name=parity{http_port}_",
            "--allow-gpu-metrics",
            "false",
            *extra_args,
        ]
        handle = open(log, "wb")  # noqa: SIM115 - the child keeps it
        return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)

    def _package(self) -> Path:
        found = sorted(self.venv.glob("lib/python3*/site-packages/pytriton/tritonserver"))
        if not found:
            raise FileNotFoundError(f"pytriton is not installed in {self.venv}")
        return found[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["install"])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    args = parser.parse_args(argv)
    print(Reference(args.home).install())
    return 0


if __name__ == "__main__":
    sys.exit(main())
