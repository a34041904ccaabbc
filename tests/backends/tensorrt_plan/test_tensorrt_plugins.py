"""Plugin libraries named by the config (``model_operations`` or the
``plugins`` parameter): found relative to the model and never outside it,
opened before TensorRT's plugin registry is initialized, and a missing one
named with its config line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from edgebox.backends.tensorrt.plugins import load_plugins, plugin_libraries
from edgebox.errors import InvalidArgument, Unavailable
from edgebox.repository.config import read_model_config
from edgebox.repository.op_libraries import OpLibrary
from fakes.fake_tensorrt_runtime import FakePycudaDriver, FakeTensorRTRuntime

CONFIG = """\
platform: "tensorrt_plan"
max_batch_size: 1
model_operations {
  op_library_filename: "plugins/libyolo.so"
  op_library_filename: "libs/libnms.so"
}
parameters { key: "plugins" value { string_value: "plugins/a.so, libs/b.so" } }
"""


def write_config(tmp_path: Path, text: str) -> Path:
    model_dir = tmp_path / "det"
    model_dir.mkdir()
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(text))
    return model_dir


def test_libraries_come_from_both_config_fields_in_order(tmp_path: Path) -> None:
    model_dir = write_config(tmp_path, CONFIG)
    config_path = model_dir / "config.pbtxt"
    libraries = plugin_libraries(read_model_config(model_dir), model_dir)
    assert libraries == [
        OpLibrary(
            model_dir / "plugins/libyolo.so",
            f"{config_path}:4: model_operations.op_library_filename",
        ),
        OpLibrary(
            model_dir / "libs/libnms.so", f"{config_path}:5: model_operations.op_library_filename"
        ),
        OpLibrary(model_dir / "plugins/a.so", f"{config_path}:7: parameters 'plugins'"),
        OpLibrary(model_dir / "libs/b.so", f"{config_path}:7: parameters 'plugins'"),
    ]


def test_an_absolute_library_is_refused_even_past_the_config_check(tmp_path: Path) -> None:
    model_dir = write_config(tmp_path, 'platform: "tensorrt_plan"\n')
    config = read_model_config(model_dir)
    config.model_operations.op_library_filename.append("/opt/plugins/libyolo.so")
    with pytest.raises(InvalidArgument) as error:
        plugin_libraries(config, model_dir)
    assert str(error.value) == (
        f"{model_dir / 'config.pbtxt'}: model_operations.op_library_filename: plugin library "
        "'/opt/plugins/libyolo.so' is outside the model folder"
    )


def test_a_library_symlinked_out_of_the_model_folder_is_refused(tmp_path: Path) -> None:
    model_dir = write_config(
        tmp_path,
        'platform: "tensorrt_plan"\n'
        'parameters { key: "plugins" value { string_value: "libevil.so" } }\n',
    )
    outside = tmp_path / "libevil.so"
    outside.write_bytes(b"\x7fELF")
    (model_dir / "libevil.so").symlink_to(outside)
    with pytest.raises(InvalidArgument) as error:
        plugin_libraries(read_model_config(model_dir), model_dir)
    assert str(error.value) == (
        f"{model_dir / 'config.pbtxt'}:2: parameters 'plugins': plugin library 'libevil.so' is "
        "outside the model folder (a symlink leads out)"
    )


def test_no_plugins_named_means_none(tmp_path: Path) -> None:
    model_dir = write_config(tmp_path, 'platform: "tensorrt_plan"\n')
    assert plugin_libraries(read_model_config(model_dir), model_dir) == []


def test_libraries_open_before_the_plugin_registry_is_initialized(tmp_path: Path) -> None:
    first, second = tmp_path / "libone.so", tmp_path / "libtwo.so"
    for path in (first, second):
        path.write_bytes(b"\x7fELF")
    cuda = FakePycudaDriver()
    trt = FakeTensorRTRuntime(cuda, plugin_libraries={str(first): ["One"], str(second): ["Two"]})
    libraries = [
        OpLibrary(first, "config.pbtxt:3: x"),
        OpLibrary(second, "config.pbtxt:4: x"),
    ]
    load_plugins(libraries, trt, logger=object(), open_library=trt.open_library)
    assert [event[1:] for event in cuda.events] == [
        ("open_library", str(first)),
        ("open_library", str(second)),
        ("init_libnvinfer_plugins", ""),
    ]
    assert {"One", "Two"} <= trt.registered_plugins


def test_registry_is_initialized_even_without_libraries() -> None:
    cuda = FakePycudaDriver()
    trt = FakeTensorRTRuntime(cuda)
    load_plugins([], trt, logger=object(), open_library=trt.open_library)
    assert [event[1] for event in cuda.events] == ["init_libnvinfer_plugins"]


def test_missing_library_names_the_path_and_the_config_line(tmp_path: Path) -> None:
    trt = FakeTensorRTRuntime(FakePycudaDriver())
    missing = tmp_path / "libgone.so"
    with pytest.raises(Unavailable) as error:
        load_plugins(
            [OpLibrary(missing, "/m/det/config.pbtxt:3: model_operations.op_library_filename")],
            trt,
            object(),
            trt.open_library,
        )
    assert str(error.value) == (
        f"plugin library '{missing}' not found "
        "(/m/det/config.pbtxt:3: model_operations.op_library_filename)"
    )
    assert not trt.registered_plugins


def test_library_that_fails_to_open_gives_the_loader_error(tmp_path: Path) -> None:
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(b"not elf")
    trt = FakeTensorRTRuntime(FakePycudaDriver())
    with pytest.raises(Unavailable) as error:
        load_plugins([OpLibrary(broken, "c:1: f")], trt, object(), trt.open_library)
    assert str(error.value) == (
        f"cannot load plugin library '{broken}' (c:1: f): {broken}: cannot open shared object "
        "file: No such file or directory"
    )
