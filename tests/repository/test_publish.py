"""``publish_version``: a version reaches the repository whole, by one rename,
or not at all.

Most tests call the function against real folders. The copy step, ``os.fsync``
and ``os.rename`` are wrapped where a test needs to look at the repository in
the middle of a publish. The last test publishes into a running poll-mode
daemon with ``python -m edgebox publish``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from cli_helpers import run_edgebox, tree
from daemon_process import wait_for
from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, NotFound
from edgebox.repository import publish as publish_module
from edgebox.repository.layout import scan_model, scan_repository
from edgebox.repository.publish import ConfigRejected, publish_version
from model_fixtures import ADD_SUB_CONFIG, add_add_sub
from scripts.onnx_builders import build_add_sub

PYTHON_MODEL = "import triton_python_backend_utils as pb_utils\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository holding add_sub version 1 with its config."""
    root = tmp_path / "repo"
    add_add_sub(root)
    return root


@pytest.fixture
def onnx_file(tmp_path: Path) -> Path:
    return build_add_sub(tmp_path / "build" / "model.onnx")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """add_sub's config, with a field the repository's copy does not have."""
    path = tmp_path / "build" / "config.pbtxt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ADD_SUB_CONFIG.format(name="add_sub") + "version_policy: { all { } }\n")
    return path


@pytest.fixture
def version_folder(tmp_path: Path) -> Path:
    """A python model's version folder, with a subfolder and a __pycache__."""
    source = tmp_path / "build" / "add_sub_v5"
    (source / "assets").mkdir(parents=True)
    (source / "__pycache__").mkdir()
    (source / "model.py").write_text(PYTHON_MODEL)
    (source / "assets" / "labels.txt").write_text("car\nbike\n")
    (source / "__pycache__" / "model.cpython-310.pyc").write_bytes(b"\0stale")
    return source


# ------------------------------------------------------------------ sources


def test_a_model_file_becomes_the_only_file_of_the_next_version(
    repo: Path, onnx_file: Path
) -> None:
    published = publish_version(onnx_file, repo, "add_sub")

    assert published == repo / "add_sub" / "2"
    assert tree(published) == {"model.onnx": onnx_file.read_bytes()}
    assert sorted(os.listdir(repo / "add_sub")) == ["1", "2", "config.pbtxt"]
    assert list(scan_model(repo / "add_sub").versions) == [1, 2]


def test_published_folders_carry_the_rename_mark_the_poller_trusts(
    repo: Path, onnx_file: Path, tmp_path: Path
) -> None:
    fresh_config = tmp_path / "fresh.pbtxt"
    fresh_config.write_text(ADD_SUB_CONFIG.format(name="fresh"))
    publish_version(onnx_file, repo, "add_sub")
    publish_version(onnx_file, repo, "fresh", config=fresh_config)

    assert scan_model(repo / "add_sub").versions[2].renamed_in
    assert not scan_model(repo / "add_sub").versions[1].renamed_in
    assert scan_model(repo / "fresh").renamed_in


def test_a_folder_source_becomes_the_version_folder_without_pycache(
    repo: Path, version_folder: Path
) -> None:
    published = publish_version(version_folder, repo, "add_sub", version="5")

    assert published == repo / "add_sub" / "5"
    assert tree(published) == {
        "assets": None,
        "assets/labels.txt": b"car\nbike\n",
        "model.py": PYTHON_MODEL.encode(),
    }
    assert sorted(os.listdir(repo / "add_sub")) == ["1", "5", "config.pbtxt"]


def test_symlinks_in_a_folder_source_are_copied_as_files(repo: Path, tmp_path: Path) -> None:
    source = tmp_path / "linked"
    source.mkdir()
    build_add_sub(tmp_path / "elsewhere" / "model.onnx")
    (source / "model.onnx").symlink_to(tmp_path / "elsewhere" / "model.onnx")

    published = publish_version(source, repo, "add_sub")

    assert not (published / "model.onnx").is_symlink()
    assert (published / "model.onnx").read_bytes() == (
        tmp_path / "elsewhere" / "model.onnx"
    ).read_bytes()


def test_a_new_model_is_created_whole_with_its_config(
    tmp_path: Path, onnx_file: Path, config_file: Path
) -> None:
    root = tmp_path / "empty_repo"
    root.mkdir()

    published = publish_version(onnx_file, root, "add_sub", config=config_file)

    assert published == root / "add_sub" / "1"
    assert tree(root) == {
        "add_sub": None,
        "add_sub/1": None,
        "add_sub/1/model.onnx": onnx_file.read_bytes(),
        "add_sub/config.pbtxt": config_file.read_bytes(),
    }


# ------------------------------------------------------------------ numbering


def test_next_version_counts_only_version_folders(repo: Path, onnx_file: Path) -> None:
    model = repo / "add_sub"
    for name in (".3.partial", "04", "notes", "7.tmp", "8.partial"):
        build_add_sub(model / name / "model.onnx")

    published = publish_version(onnx_file, repo, "add_sub")

    assert published == model / "2"
    assert list(scan_model(model).versions) == [1, 2]


def test_next_version_follows_the_highest_not_the_count(repo: Path, onnx_file: Path) -> None:
    build_add_sub(repo / "add_sub" / "9" / "model.onnx")

    assert publish_version(onnx_file, repo, "add_sub") == repo / "add_sub" / "10"


@pytest.mark.parametrize("version", ["0", "01", "007", "-1", "two", "1.5", "", "\u00b2"])
def test_a_version_outside_the_naming_rule_is_refused(
    repo: Path, onnx_file: Path, version: str
) -> None:
    before = tree(repo)

    with pytest.raises(InvalidArgument) as info:
        publish_version(onnx_file, repo, "add_sub", version=version)

    assert str(info.value) == (
        f"version '{version}': a version folder is named with a positive integer "
        "without a leading zero"
    )
    assert tree(repo) == before


def test_an_int_version_is_accepted(repo: Path, onnx_file: Path) -> None:
    assert publish_version(onnx_file, repo, "add_sub", version=3) == repo / "add_sub" / "3"


# ------------------------------------------------------------------ never overwrite


def test_an_existing_version_is_refused_before_copying(
    repo: Path, onnx_file: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_copy(source: Path, target: Path) -> None:
        raise AssertionError("copied although the version exists")

    monkeypatch.setattr(publish_module, "_copy_file", no_copy)
    before = tree(repo)

    with pytest.raises(EdgeboxError) as info:
        publish_version(onnx_file, repo, "add_sub", version="1", config=config_file)

    assert info.value.code is ErrorCode.ALREADY_EXISTS
    assert str(info.value) == (
        f"model 'add_sub' version 1: '{repo}/add_sub/1' already exists; "
        "versions are never overwritten, publish a new version number"
    )
    assert tree(repo) == before


def test_a_file_named_like_the_version_is_not_replaced(repo: Path, onnx_file: Path) -> None:
    (repo / "add_sub" / "2").write_text("not a folder")
    before = tree(repo)

    with pytest.raises(EdgeboxError) as info:
        publish_version(onnx_file, repo, "add_sub", version="2")

    assert info.value.code is ErrorCode.ALREADY_EXISTS
    assert tree(repo) == before


@pytest.mark.parametrize("appeared", ["an empty folder", "a full folder"])
def test_a_version_that_appears_during_the_copy_wins_and_staging_is_removed(
    repo: Path, onnx_file: Path, monkeypatch: pytest.MonkeyPatch, appeared: str
) -> None:
    target = repo / "add_sub" / "2"
    real_copy = publish_module._copy_file

    def copy_while_another_publishes(source: Path, destination: Path) -> None:
        real_copy(source, destination)
        target.mkdir()
        if appeared == "a full folder":
            (target / "model.onnx").write_bytes(b"the other copy")

    monkeypatch.setattr(publish_module, "_copy_file", copy_while_another_publishes)

    with pytest.raises(EdgeboxError) as info:
        publish_version(onnx_file, repo, "add_sub", version="2")

    assert info.value.code is ErrorCode.ALREADY_EXISTS
    assert sorted(os.listdir(repo / "add_sub")) == ["1", "2", "config.pbtxt"]
    expected = {"model.onnx": b"the other copy"} if appeared == "a full folder" else {}
    assert tree(target) == expected


def test_a_version_that_appears_just_before_the_rename_is_not_replaced(
    repo: Path, onnx_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = repo / "add_sub" / "2"
    real_rename = os.rename

    def rename_after_another_publish(source, destination) -> None:
        target.mkdir()
        (target / "model.onnx").write_bytes(b"the other copy")
        real_rename(source, destination)

    monkeypatch.setattr(os, "rename", rename_after_another_publish)

    with pytest.raises(EdgeboxError) as info:
        publish_version(onnx_file, repo, "add_sub", version="2")

    assert info.value.code is ErrorCode.ALREADY_EXISTS
    assert sorted(os.listdir(repo / "add_sub")) == ["1", "2", "config.pbtxt"]
    assert tree(target) == {"model.onnx": b"the other copy"}


def test_a_new_model_that_appears_during_the_copy_wins_and_staging_is_removed(
    tmp_path: Path, onnx_file: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "empty_repo"
    root.mkdir()
    real_copy = publish_module._copy_file

    def copy_while_another_publishes(source: Path, destination: Path) -> None:
        real_copy(source, destination)
        add_add_sub(root)

    monkeypatch.setattr(publish_module, "_copy_file", copy_while_another_publishes)

    with pytest.raises(EdgeboxError) as info:
        publish_version(onnx_file, root, "add_sub", config=config_file)

    assert info.value.code is ErrorCode.ALREADY_EXISTS
    assert str(info.value) == (
        f"model 'add_sub': '{root}/add_sub' appeared while publishing; "
        "nothing published, run publish again"
    )
    assert os.listdir(root) == ["add_sub"]
    assert sorted(os.listdir(root / "add_sub")) == ["1", "config.pbtxt"]


# ------------------------------------------------------------------ failures leave nothing


def test_a_failed_copy_removes_the_staging_folder(
    repo: Path, version_folder: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_copy2 = shutil.copy2
    copied: list[str] = []

    def copy2_failing_on_the_second_file(source, destination, **kwargs):
        if copied:
            raise PermissionError(13, "Permission denied", str(source))
        copied.append(str(source))
        return real_copy2(source, destination, **kwargs)

    monkeypatch.setattr(shutil, "copy2", copy2_failing_on_the_second_file)
    before = tree(repo)

    with pytest.raises(EdgeboxError) as info:
        publish_version(version_folder, repo, "add_sub", config=config_file)

    assert str(info.value) == (
        f"model 'add_sub' version 2: cannot copy '{version_folder}': "
        f"[Errno 13] Permission denied: '{version_folder}/model.py'"
    )
    assert copied == [f"{version_folder}/assets/labels.txt"]
    assert tree(repo) == before


def test_a_failed_copy_of_a_new_model_leaves_the_repository_empty(
    tmp_path: Path, onnx_file: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "empty_repo"
    root.mkdir()

    def failing_copy(source: Path, target: Path) -> None:
        raise OSError(5, "Input/output error", str(source))

    monkeypatch.setattr(publish_module, "_copy_file", failing_copy)

    with pytest.raises(EdgeboxError, match="Input/output error"):
        publish_version(onnx_file, root, "add_sub", config=config_file)

    assert os.listdir(root) == []


def test_an_interrupted_copy_removes_the_staging_folder(
    repo: Path, onnx_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(source: Path, target: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(publish_module, "_copy_file", interrupted)
    before = tree(repo)

    with pytest.raises(KeyboardInterrupt):
        publish_version(onnx_file, repo, "add_sub")

    assert tree(repo) == before


# ------------------------------------------------------------------ config


def test_the_config_is_installed_atomically_before_the_version_appears(
    repo: Path, onnx_file: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = repo / "add_sub"
    events: list[tuple[str, str, str]] = []
    real_replace, real_rename = os.replace, os.rename

    def recording_replace(source, destination) -> None:
        events.append(("replace", os.path.basename(source), os.path.basename(destination)))
        assert Path(source).read_bytes() == config_file.read_bytes()
        real_replace(source, destination)

    def recording_rename(source, destination) -> None:
        events.append(("rename", os.path.basename(source), os.path.basename(destination)))
        assert (model / "config.pbtxt").read_bytes() == config_file.read_bytes()
        real_rename(source, destination)

    monkeypatch.setattr(os, "replace", recording_replace)
    monkeypatch.setattr(os, "rename", recording_rename)

    publish_version(onnx_file, repo, "add_sub", config=config_file)

    assert [(kind, destination) for kind, _, destination in events] == [
        ("replace", "config.pbtxt"),
        ("rename", "2"),
    ]
    assert events[0][1].startswith(".config.pbtxt.tmp-")
    assert events[1][1].startswith(".2.partial-")
    assert (model / "config.pbtxt").read_bytes() == config_file.read_bytes()
    assert sorted(os.listdir(model)) == ["1", "2", "config.pbtxt"]


def test_an_identical_config_is_not_rewritten(repo: Path, onnx_file: Path, tmp_path: Path) -> None:
    config = repo / "add_sub" / "config.pbtxt"
    same = tmp_path / "same.pbtxt"
    same.write_bytes(config.read_bytes())
    before = config.stat()

    publish_version(onnx_file, repo, "add_sub", config=same)

    after = config.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )


def test_a_config_that_does_not_parse_is_refused_with_its_location(
    repo: Path, onnx_file: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.pbtxt"
    bad.write_text('platform: "onnxruntime_onnx"\nmax_batch_size 8\n')
    before = tree(repo)

    with pytest.raises(ConfigRejected) as info:
        publish_version(onnx_file, repo, "add_sub", config=bad)

    assert [str(p) for p in info.value.problems] == [
        f"{bad}:2:16: 'max_batch_size 8': Expected \":\"."
    ]
    assert str(info.value) == (
        f"model 'add_sub': config '{bad}' has 1 problem(s); nothing published"
    )
    assert tree(repo) == before


def test_a_config_for_another_model_is_refused(repo: Path, onnx_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pbtxt"
    other.write_text(ADD_SUB_CONFIG.format(name="other").lstrip())
    before = tree(repo)

    with pytest.raises(ConfigRejected) as info:
        publish_version(onnx_file, repo, "add_sub", config=other)

    assert [str(p) for p in info.value.problems] == [
        f"{other}:1:1: model name 'other' does not match its folder 'add_sub'"
    ]
    assert tree(repo) == before


def test_a_missing_config_file_is_refused(repo: Path, onnx_file: Path, tmp_path: Path) -> None:
    with pytest.raises(NotFound) as info:
        publish_version(onnx_file, repo, "add_sub", config=tmp_path / "absent.pbtxt")

    assert str(info.value) == f"config file '{tmp_path / 'absent.pbtxt'}' does not exist"


@pytest.mark.parametrize("model_folder", ["missing", "without config"])
def test_a_model_without_config_needs_one(
    tmp_path: Path, onnx_file: Path, model_folder: str
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    if model_folder == "without config":
        build_add_sub(root / "add_sub" / "1" / "model.onnx")
    before = tree(root)

    with pytest.raises(NotFound) as info:
        publish_version(onnx_file, root, "add_sub")

    assert str(info.value) == (f"model 'add_sub' has no config.pbtxt in {root}; pass --config FILE")
    assert tree(root) == before


# ------------------------------------------------------------------ refused arguments


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "model name is empty"),
        ("a/b", "model name 'a/b': must not contain '/'"),
        (
            ".hidden",
            "model name '.hidden': names starting with '.' or ending with .tmp or .partial "
            "are ignored by the repository",
        ),
        (
            "add_sub.tmp",
            "model name 'add_sub.tmp': names starting with '.' or ending with .tmp or "
            ".partial are ignored by the repository",
        ),
        (
            "add_sub.partial",
            "model name 'add_sub.partial': names starting with '.' or ending with .tmp or "
            ".partial are ignored by the repository",
        ),
    ],
)
def test_a_model_name_the_repository_would_ignore_is_refused(
    repo: Path, onnx_file: Path, config_file: Path, name: str, message: str
) -> None:
    before = tree(repo)

    with pytest.raises(InvalidArgument) as info:
        publish_version(onnx_file, repo, name, config=config_file)

    assert str(info.value) == message
    assert tree(repo) == before


def test_a_repository_that_is_not_a_folder_is_refused(tmp_path: Path, onnx_file: Path) -> None:
    with pytest.raises(NotFound) as missing:
        publish_version(onnx_file, tmp_path / "nowhere", "add_sub")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(InvalidArgument) as not_folder:
        publish_version(onnx_file, a_file, "add_sub")

    assert str(missing.value) == f"repository '{tmp_path / 'nowhere'}' is not a folder"
    assert str(not_folder.value) == f"repository '{a_file}' is not a folder"


def test_a_missing_source_is_refused(repo: Path, tmp_path: Path) -> None:
    before = tree(repo)

    with pytest.raises(NotFound) as info:
        publish_version(tmp_path / "model.onnx", repo, "add_sub")

    assert str(info.value) == f"source '{tmp_path / 'model.onnx'}' does not exist"
    assert tree(repo) == before


def test_a_source_holding_the_model_folder_is_refused(repo: Path) -> None:
    before = tree(repo)

    with pytest.raises(InvalidArgument) as info:
        publish_version(repo, repo, "add_sub")

    assert str(info.value) == (
        f"source '{repo}' contains the model folder '{repo / 'add_sub'}'; "
        "copy the version from somewhere else"
    )
    assert tree(repo) == before


# ------------------------------------------------------------------ what a poller can see


@pytest.mark.parametrize("model_exists", [True, False], ids=["existing model", "new model"])
def test_no_incomplete_version_is_ever_visible(
    tmp_path: Path,
    version_folder: Path,
    config_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_exists: bool,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    if model_exists:
        add_add_sub(root)
    number = 2 if model_exists else 1
    model = root / "add_sub"
    target = model / str(number)
    real_copy, real_rename = publish_module._copy_file, os.rename
    copies: list[str] = []

    def assert_nothing_visible() -> None:
        assert not target.exists()
        assert number not in scan_model(model).versions
        snapshot = scan_repository(root)
        if model_exists:
            assert list(snapshot.models["add_sub"].versions) == [1]
        else:
            assert snapshot.models == {}

    def copy_and_look(source: Path, destination: Path) -> None:
        assert_nothing_visible()
        real_copy(source, destination)
        copies.append(os.path.relpath(source, version_folder))
        assert_nothing_visible()

    def rename_complete_folder(source, destination) -> None:
        assert_nothing_visible()
        staged = Path(source) / str(number) if not model_exists else Path(source)
        assert tree(staged) == {
            "assets": None,
            "assets/labels.txt": b"car\nbike\n",
            "model.py": PYTHON_MODEL.encode(),
        }
        real_rename(source, destination)

    monkeypatch.setattr(publish_module, "_copy_file", copy_and_look)
    monkeypatch.setattr(os, "rename", rename_complete_folder)

    publish_version(version_folder, root, "add_sub", config=config_file)

    assert copies == ["assets/labels.txt", "model.py"]
    assert number in scan_model(model).versions


@pytest.mark.parametrize("source_kind", ["folder", "file"])
def test_every_file_and_folder_is_flushed_before_the_rename(
    repo: Path,
    version_folder: Path,
    onnx_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    source_kind: str,
) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def recording_fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def recording_rename(source, destination) -> None:
        events.append(("rename", os.path.realpath(source)))
        real_rename(source, destination)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "rename", recording_rename)

    publish_version(version_folder if source_kind == "folder" else onnx_file, repo, "add_sub")

    model = os.path.realpath(repo / "add_sub")
    renames = [i for i, (kind, _) in enumerate(events) if kind == "rename"]
    assert len(renames) == 1
    staging = events[renames[0]][1]
    assert os.path.basename(staging).startswith(".2.partial-")
    if source_kind == "folder":
        files = [f"{staging}/assets/labels.txt", f"{staging}/assets", f"{staging}/model.py"]
    else:
        files = [f"{staging}/model.onnx"]
    assert events == [
        *(("fsync", path) for path in files),
        ("fsync", staging),
        ("rename", staging),
        ("fsync", model),
    ]


# ------------------------------------------------------------------ end to end


def served_versions(client: httpclient.InferenceServerClient, model: str) -> list[str]:
    try:
        return client.get_model_metadata(model)["versions"]
    except Exception:
        return []


def test_a_published_version_is_served_without_ever_being_unavailable(
    tmp_path: Path, repo: Path, onnx_file: Path, start_daemon
) -> None:
    daemon = start_daemon(repo, "--model-control-mode", "poll", "--repository-poll-secs", "0.2")
    client = httpclient.InferenceServerClient(daemon.url)
    assert served_versions(client, "add_sub") == ["1"]

    result = run_edgebox("publish", str(onnx_file), "--model", "add_sub", "--repository", str(repo))

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"published model 'add_sub' version 2 to {repo}/add_sub/2\n"
    wait_for(lambda: served_versions(client, "add_sub") == ["2"], what="version 2 to serve")

    new_config = tmp_path / "new_config.pbtxt"
    new_config.write_text(ADD_SUB_CONFIG.format(name="add_sub_b"))
    result = run_edgebox(
        "publish", str(onnx_file), "--model", "add_sub_b", "--repository", str(repo),
        "--config", str(new_config),
    )  # fmt: skip

    assert (result.returncode, result.stderr) == (0, "")
    wait_for(lambda: served_versions(client, "add_sub_b") == ["1"], what="the new model")

    a = np.ones((1, 16), dtype=np.float32)
    inputs = [
        httpclient.InferInput("INPUT0", [1, 16], "FP32"),
        httpclient.InferInput("INPUT1", [1, 16], "FP32"),
    ]
    for tensor in inputs:
        tensor.set_data_from_numpy(a)
    response = client.infer("add_sub", inputs).get_response()
    assert response["model_version"] == "2"
    client.close()
    log = daemon.log()
    assert "model 'add_sub' version 2: UNAVAILABLE" not in log
    assert [
        line for line in log.splitlines() if "add_sub_b" in line and "UNAVAILABLE" in line
    ] == []
    assert "model 'add_sub_b' version 1: READY" in log
