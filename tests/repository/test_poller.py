"""Poll mode, one poll at a time: ``RepositoryPoller.poll_once()`` is driven
directly (no thread) against a real folder, with a fake lifecycle manager that
records what the poller asked of it.

Files written by a test are always newer than the previous poll, so a new or
changed version folder settles on the poll after the one that first sees it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from edgebox.errors import EdgeboxError, Unavailable
from edgebox.repository.layout import ModelFolder
from edgebox.repository.poller import RepositoryPoller

CONFIG = b'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n'


class FakeLifecycleManager:
    """Records ``load_model`` and ``forget_model`` calls; loads of the models in
    ``failing`` raise, as a real load that ends with no ready version does."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.failing: set[str] = set()

    def load_model(self, name: str, config=None, folder: ModelFolder | None = None) -> None:
        assert config is None
        assert folder is not None
        self.calls.append(("load_model", name, sorted(folder.versions)))
        if name in self.failing:
            raise Unavailable(f"model '{name}': no version could be loaded")

    def forget_model(self, name: str) -> None:
        self.calls.append(("forget_model", name))

    def take_calls(self) -> list[tuple]:
        calls, self.calls = self.calls, []
        return calls


def add_model(root: Path, name: str, versions: tuple[int, ...] = (1,)) -> Path:
    model = root / name
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.pbtxt").write_bytes(CONFIG)
    for version in versions:
        add_version(model, version)
    return model


def add_version(model: Path, version: int, content: bytes = b"onnx bytes") -> Path:
    folder = model / str(version)
    folder.mkdir()
    (folder / "model.onnx").write_bytes(content)
    return folder


@pytest.fixture
def manager() -> FakeLifecycleManager:
    return FakeLifecycleManager()


@pytest.fixture
def primed(tmp_path: Path, manager: FakeLifecycleManager):
    """A poller over ``tmp_path`` whose startup load has already happened."""

    def make() -> RepositoryPoller:
        poller = RepositoryPoller(manager, tmp_path, poll_interval_s=2.0)
        poller.prime()
        return poller

    return make


def test_unchanged_repository_makes_no_calls(tmp_path, manager, primed) -> None:
    add_model(tmp_path, "add_sub", (1, 2))
    add_model(tmp_path, "lane")
    poller = primed()
    for _ in range(3):
        poller.poll_once()
    assert manager.calls == []


def test_new_version_is_loaded_only_once_settled(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()

    add_version(model, 2)
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1, 2])]
    poller.poll_once()
    assert manager.take_calls() == []


def test_version_still_being_copied_is_not_loaded(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()

    version = add_version(model, 2, b"first half")
    poller.poll_once()
    with open(version / "model.onnx", "ab") as handle:
        handle.write(b", second half")
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1, 2])]


def test_serving_version_rewritten_in_place_is_reloaded_once_settled(
    tmp_path, manager, primed
) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()

    (model / "1" / "model.onnx").write_bytes(b"a newer model, larger")
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]


def test_new_model_is_loaded_once_its_versions_settle(tmp_path, manager, primed) -> None:
    add_model(tmp_path, "add_sub")
    poller = primed()

    add_model(tmp_path, "lane", (1, 2))
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "lane", [1, 2])]


def test_removed_model_is_forgotten_once(tmp_path, manager, primed) -> None:
    add_model(tmp_path, "add_sub")
    add_model(tmp_path, "lane")
    poller = primed()

    shutil.rmtree(tmp_path / "lane")
    poller.poll_once()
    assert manager.take_calls() == [("forget_model", "lane")]
    poller.poll_once()
    assert manager.take_calls() == []


def test_removed_version_reloads_the_model(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub", (1, 2))
    poller = primed()

    shutil.rmtree(model / "2")
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]


def test_config_change_reloads_once_the_file_settles(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()

    (model / "config.pbtxt").write_bytes(CONFIG[: len(CONFIG) // 2])
    poller.poll_once()
    assert manager.take_calls() == []
    (model / "config.pbtxt").write_bytes(CONFIG + b"dynamic_batching { }\n")
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]


def test_failed_load_is_not_retried_until_files_change(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()
    manager.failing.add("add_sub")

    add_version(model, 2)
    poller.poll_once()
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1, 2])]
    poller.poll_once()
    poller.poll_once()
    assert manager.take_calls() == []

    (model / "config.pbtxt").write_bytes(CONFIG + b"# fixed\n")
    poller.poll_once()
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1, 2])]


def test_failed_load_does_not_stop_other_models(tmp_path, manager, primed) -> None:
    bad = add_model(tmp_path, "a_bad")
    good = add_model(tmp_path, "b_good")
    poller = primed()
    manager.failing.add("a_bad")

    add_version(bad, 2)
    add_version(good, 2)
    poller.poll_once()
    poller.poll_once()
    assert manager.take_calls() == [
        ("load_model", "a_bad", [1, 2]),
        ("load_model", "b_good", [1, 2]),
    ]


def test_failed_forget_does_not_stop_the_poll(tmp_path, manager, primed) -> None:
    add_model(tmp_path, "gone")
    stays = add_model(tmp_path, "stays")
    poller = primed()

    def failing_forget(name: str) -> None:
        manager.calls.append(("forget_model", name))
        raise EdgeboxError(f"model '{name}': unloading failed")

    manager.forget_model = failing_forget
    shutil.rmtree(tmp_path / "gone")
    (stays / "config.pbtxt").write_bytes(CONFIG + b"# edited\n")
    poller.poll_once()
    poller.poll_once()
    assert manager.take_calls() == [("forget_model", "gone"), ("load_model", "stays", [1])]


def test_without_priming_every_model_loads_once_settled(tmp_path, manager) -> None:
    add_model(tmp_path, "add_sub")
    poller = RepositoryPoller(manager, tmp_path, poll_interval_s=2.0)
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]
    poller.poll_once()
    assert manager.take_calls() == []


def test_a_copy_paused_longer_than_two_polls_is_not_loaded(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()
    (model / "2").mkdir()
    with open(model / "2" / "model.onnx", "wb") as copy:
        copy.write(b"first half")
        copy.flush()
        for _ in range(4):
            poller.poll_once()
        assert manager.take_calls() == [], "a half-written file was handed to the manager"
        copy.write(b" second half")
    poller.poll_once()
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1, 2])]


def test_a_version_renamed_into_place_is_loaded_on_the_first_poll(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()
    staging = model / ".2.partial"
    staging.mkdir()
    (staging / "model.onnx").write_bytes(b"complete model")
    os.utime(staging, ns=(0, os.stat(staging).st_mtime_ns - 5_000_000))
    staging.rename(model / "2")
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1, 2])]


def test_a_version_filled_in_place_waits_for_a_second_poll(tmp_path, manager, primed) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()
    add_version(model, 2)
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1, 2])]


def test_a_new_model_renamed_into_place_is_loaded_on_the_first_poll(tmp_path, manager, primed) -> None:
    poller = primed()
    staging = tmp_path / ".new_model.partial"
    add_model(staging.parent, staging.name)
    os.utime(staging, ns=(0, os.stat(staging).st_mtime_ns - 5_000_000))
    staging.rename(tmp_path / "new_model")
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "new_model", [1])]


def add_model_without_config(root: Path, name: str, versions: tuple[int, ...] = (1,)) -> Path:
    model = root / name
    model.mkdir(parents=True)
    for version in versions:
        add_version(model, version)
    return model


def test_new_model_without_config_is_loaded_once_its_version_settles(
    tmp_path, manager, primed
) -> None:
    poller = primed()
    add_model_without_config(tmp_path, "add_sub")
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]
    poller.poll_once()
    assert manager.take_calls() == []


def test_model_without_config_is_not_loaded_while_its_version_is_still_copied(
    tmp_path, manager, primed
) -> None:
    poller = primed()
    model = tmp_path / "add_sub"
    model.mkdir()
    (model / "1").mkdir()
    with open(model / "1" / "model.onnx", "wb") as copy:
        copy.write(b"first half")
        copy.flush()
        for _ in range(3):
            poller.poll_once()
        assert manager.take_calls() == [], "a half-written model file was handed to the manager"
        copy.write(b" second half")
    poller.poll_once()
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]


def test_a_new_model_without_config_renamed_into_place_is_loaded_on_the_first_poll(
    tmp_path, manager, primed
) -> None:
    poller = primed()
    staging = add_model_without_config(tmp_path, ".new_model.partial")
    os.utime(staging, ns=(0, os.stat(staging).st_mtime_ns - 5_000_000))
    staging.rename(tmp_path / "new_model")
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "new_model", [1])]


def test_config_written_into_a_model_without_one_reloads_it_once_settled(
    tmp_path, manager, primed
) -> None:
    model = add_model_without_config(tmp_path, "add_sub")
    poller = primed()
    (model / "config.pbtxt").write_bytes(CONFIG)
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]


def test_config_removed_from_a_served_model_reloads_it_from_its_files(
    tmp_path, manager, primed
) -> None:
    model = add_model(tmp_path, "add_sub")
    poller = primed()
    (model / "config.pbtxt").unlink()
    poller.poll_once()
    assert manager.take_calls() == []
    poller.poll_once()
    assert manager.take_calls() == [("load_model", "add_sub", [1])]
