"""A stand-in for jetson-stats' ``jtop.jtop`` client (4.x), holding what its
properties return on an AGX Orin 64GB under JetPack 6.0 in MAXN with one DLA
busy: the shapes documented in jtop/jtop.py (sizes in kB, clocks in kHz,
percentages 0-100, -256 °C for an offline zone). jtop's own objects are
dict-like (``get``, ``items``, ``values``, ``in``, ``len``), plain dicts here.
Tests change the dicts to model other states."""

from __future__ import annotations

import copy
from typing import Any


class FakeNVPModel:
    """jtop's NVPModel: ``name`` and ``id`` of the running mode."""

    def __init__(self, name: str, mode_id: int) -> None:
        self.name = name
        self.id = mode_id


class FakeJetsonClocks:
    """jtop's JetsonClocks is truthy while jetson_clocks is running."""

    def __init__(self, running: bool) -> None:
        self.running = running

    def __bool__(self) -> bool:
        return self.running


def _core(idle: float, online: bool = True) -> dict[str, Any]:
    if not online:
        return {"online": False, "governor": "schedutil", "freq": {}, "info_freq": {}}
    return {
        "online": True,
        "governor": "schedutil",
        "freq": {"min": 115200, "max": 2201600, "cur": 2188800},
        "info_freq": {"min": 115200, "max": 2201600, "cur": 2188800},
        "idle_state": {"WFI": 1, "c7": 1},
        "user": round((100 - idle) * 0.7, 1),
        "nice": 0.0,
        "system": round((100 - idle) * 0.3, 1),
        "idle": idle,
        "model": "ARMv8 Processor rev 1 (v8l)",
    }


def _engine(online: bool, cur_khz: int, max_khz: int | None = None) -> dict[str, Any]:
    engine: dict[str, Any] = {"online": online, "cur": cur_khz}
    if max_khz is not None:
        engine.update({"min": 0, "max": max_khz})
    return engine


AGX_ORIN = {
    "board": {
        "platform": {"Machine": "aarch64", "System": "Linux", "Python": "3.10.12"},
        "hardware": {
            "Model": "NVIDIA Jetson AGX Orin Developer Kit",
            "699-level Part Number": "699-13701-0005-500 M.0",
            "P-Number": "p3701-0005",
            "Module": "NVIDIA Jetson AGX Orin (64GB ram)",
            "SoC": "tegra234",
            "CUDA Arch BIN": "8.7",
            "Serial Number": "1421022354321",
            "L4T": "36.3.0",
            "Jetpack": "6.0",
        },
        "libraries": {"CUDA": "12.2.140", "TensorRT": "8.6.2.3"},
    },
    "cpu": {
        "total": {"user": 9.1, "nice": 0.0, "system": 3.4, "idle": 87.5},
        "cpu": [
            _core(idle)
            for idle in (80.0, 85.5, 90.0, 92.0, 88.0, 86.0, 89.5, 91.0, 84.0, 87.0, 90.5, 86.5)
        ],
    },
    "memory": {
        "RAM": {
            "tot": 64335836,
            "used": 4223496,
            "free": 58021340,
            "buffers": 61452,
            "cached": 2345188,
            "shared": 102400,
            "lfb": 14920,
        },
        "SWAP": {"tot": 32167908, "used": 0, "cached": 0, "table": {}},
        "EMC": {
            "online": True,
            "val": 14,
            "cur": 3199000,
            "max": 3199000,
            "min": 204000,
            "override": 0,
        },
    },
    "gpu": {
        "gpu": {
            "type": "integrated",
            "status": {"railgate": False, "tpc_pg_mask": False, "3d_scaling": True, "load": 52.3},
            "freq": {
                "governor": "nvhost_podgov",
                "cur": 1300500,
                "max": 1300500,
                "min": 306000,
                "GPC": [1300500, 1300500],
            },
            "power_control": "auto",
        }
    },
    "engine": {
        "APE": {"APE": _engine(False, 0)},
        "DLA0": {
            "DLA0_CORE": _engine(True, 1600000, 1600000),
            "DLA0_FALCON": _engine(True, 844800, 844800),
        },
        "DLA1": {
            "DLA1_CORE": _engine(False, 0, 1600000),
            "DLA1_FALCON": _engine(False, 0, 844800),
        },
        "NVDEC": {"NVDEC": _engine(False, 0, 1011200)},
        "NVENC": {"NVENC": _engine(False, 0, 1011200)},
        "NVJPG": {"NVJPG": _engine(True, 345600, 793600), "NVJPG1": _engine(False, 0, 793600)},
        "OFA": {"OFA": _engine(False, 0, 998400)},
        "PVA0": {
            "PVA0_CPU_AXI": _engine(False, 0, 985600),
            "PVA0_VPS": _engine(False, 0, 1369600),
        },
        "SE": {"SE": _engine(True, 652800, 652800)},
        "VIC": {"VIC": _engine(True, 115200, 1036800)},
    },
    "fan": {
        "pwmfan": {
            "speed": [25.9],
            "rpm": [1346],
            "profile": "quiet",
            "governor": "cont",
            "control": "close_loop",
        }
    },
    "temperature": {
        "cpu": {"online": True, "temp": 47.3, "max": -256.0, "crit": -256.0},
        "cv0": {"online": False, "temp": -256.0, "max": -256.0, "crit": -256.0},
        "cv1": {"online": False, "temp": -256.0, "max": -256.0, "crit": -256.0},
        "cv2": {"online": False, "temp": -256.0, "max": -256.0, "crit": -256.0},
        "gpu": {"online": True, "temp": 45.7, "max": -256.0, "crit": -256.0},
        "soc0": {"online": True, "temp": 44.9, "max": -256.0, "crit": -256.0},
        "soc1": {"online": True, "temp": 45.2, "max": -256.0, "crit": -256.0},
        "soc2": {"online": True, "temp": 44.2, "max": -256.0, "crit": -256.0},
        "tj": {"online": True, "temp": 47.3, "max": -256.0, "crit": -256.0},
    },
    "power": {
        "rail": {
            "VDD_GPU_SOC": {
                "online": True,
                "type": "INA3221",
                "status": "ok",
                "volt": 4992,
                "curr": 636,
                "warn": 32760,
                "crit": 32760,
                "power": 3174,
                "avg": 3012,
            },
            "VDD_CPU_CV": {
                "online": True,
                "type": "INA3221",
                "status": "ok",
                "volt": 4992,
                "curr": 159,
                "warn": 32760,
                "crit": 32760,
                "power": 793,
                "avg": 801,
            },
            "VIN_SYS_5V0": {
                "online": True,
                "type": "INA3221",
                "status": "ok",
                "volt": 4984,
                "curr": 437,
                "warn": 32760,
                "crit": 32760,
                "power": 2177,
                "avg": 2170,
            },
            "VDDQ_VDD2_1V8AO": {
                "online": True,
                "type": "INA3221",
                "status": "ok",
                "volt": 4992,
                "curr": 120,
                "warn": 32760,
                "crit": 32760,
                "power": 599,
                "avg": 597,
            },
        },
        "tot": {"volt": 0, "curr": 0, "power": 6743, "avg": 6580, "name": "ALL"},
    },
}


class FakeJtop:
    """Answers like a started jtop client; ``fail_with`` makes ``ok`` raise
    what jtop's reader thread caught, ``running=False`` makes it return False."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = copy.deepcopy(state if state is not None else AGX_ORIN)
        self.board = state["board"]
        self.cpu = state["cpu"]
        self.memory = state["memory"]
        self.gpu = state["gpu"]
        self.engine = state["engine"]
        self.fan = state["fan"]
        self.temperature = state["temperature"]
        self.power = state["power"]
        self.nvpmodel: FakeNVPModel | None = FakeNVPModel("MAXN", 0)
        self.jetson_clocks: FakeJetsonClocks | None = FakeJetsonClocks(False)
        self.running = True
        self.fail_with: BaseException | None = None
        self.closed = False

    def ok(self, spin: bool = False) -> bool:
        if self.fail_with is not None:
            raise self.fail_with
        return self.running

    def close(self) -> None:
        self.closed = True
