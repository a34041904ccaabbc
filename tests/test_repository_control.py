"""Repository control beside the dataplane: each verb in its one model control
mode, and a load's failure worded as Triton's while the server serves but
passed through as it is once the server is stopping."""

from __future__ import annotations

import pytest

from edgebox.errors import ConfigError, InvalidArgument, Unavailable, Unsupported
from edgebox.repository.override_folders import OverrideFolders
from edgebox.repository_control import RepositoryControl
from model_fixtures import add_add_sub, write_model


def test_a_failed_load_is_refused_in_tritons_words_while_the_server_is_live(tmp_path, stack):
    write_model(tmp_path, "bad", "name: {")
    with pytest.raises(InvalidArgument, match=r"^failed to load 'bad', failed to poll from model"):
        stack.repository_control.load_model("bad")


def test_a_failed_load_passes_through_as_it_is_once_the_server_is_stopping(tmp_path, stack):
    write_model(tmp_path, "bad", "name: {")
    stack.dataplane.mark_stopping()
    with pytest.raises(ConfigError) as raised:
        stack.repository_control.load_model("bad")
    assert not isinstance(raised.value, InvalidArgument)


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_load_and_unload_need_explicit_mode(tmp_path, stack, mode):
    add_add_sub(tmp_path)
    control = RepositoryControl(stack.registry, stack.manager, stack.dataplane.live, mode)
    for verb in (control.load_model, control.unload_model):
        with pytest.raises(Unavailable, match=f"not allowed in model control mode '{mode}'"):
            verb("add_sub")
    assert not stack.registry.model_names()


@pytest.mark.parametrize("mode", ["none", "explicit"])
def test_rollback_and_restore_need_poll_mode(tmp_path, stack, mode):
    add_add_sub(tmp_path, versions=(1, 2))
    control = RepositoryControl(stack.registry, stack.manager, stack.dataplane.live, mode)
    with pytest.raises(Unsupported, match=f"this server runs in '{mode}' mode$"):
        control.rollback_model("add_sub", 1)
    with pytest.raises(Unsupported, match=f"this server runs in '{mode}' mode$"):
        control.restore_model("add_sub")
    assert (tmp_path / "add_sub" / "2").is_dir()


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_a_load_with_files_outside_explicit_mode_writes_nothing(tmp_path, stack, mode):
    overrides = OverrideFolders(tmp_path / "overrides", 1024)
    control = RepositoryControl(
        stack.registry, stack.manager, stack.dataplane.live, mode, overrides
    )
    with pytest.raises(Unavailable, match=f"not allowed in model control mode '{mode}'"):
        control.load_model("x", {"config": "{}", "file:1/model.onnx": b"onnx"})
    assert not (tmp_path / "overrides").exists()
    assert not (tmp_path / "x").exists()


def test_a_load_with_files_needs_override_folders(stack):
    with pytest.raises(Unsupported, match=r"^failed to load 'x': model files in a load request"):
        stack.repository_control.load_model("x", {"config": "{}", "file:1/model.onnx": b"o"})
