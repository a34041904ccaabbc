"""The half-copy guard: a version folder is taken once its fingerprint holds
across two polls, or at first sight when everything in it predates the
previous poll (it arrived complete, by a rename).

Tests that need "older than the previous poll" use fingerprints built here
with chosen times; file times on disk cannot be set into the past (ctime).
"""

from __future__ import annotations

from pathlib import Path

from edgebox.repository.layout import VersionFolder, scan_model
from edgebox.repository.settle import SettleTracker

SECOND_NS = 1_000_000_000
T0 = 1_700_000_000 * SECOND_NS
"""An arbitrary wall-clock time for the polls in the tests below."""


def folder_with_times(path: str, newest_ns: int, size: int = 10) -> VersionFolder:
    older = newest_ns - 5 * SECOND_NS
    return VersionFolder(
        1,
        Path(path),
        ((".", 0, older, older), ("model.onnx", size, older, newest_ns)),
    )


def scanned_version(model_dir: Path, number: int = 1) -> VersionFolder:
    return scan_model(model_dir).versions[number]


def prints(*folders: VersionFolder) -> dict[Path, tuple]:
    return {folder.path: folder.fingerprint for folder in folders}


def test_first_poll_settles_nothing(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.onnx").write_bytes(b"onnx")
    tracker = SettleTracker()
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0) == set()


def test_unchanged_across_two_polls_is_settled(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.onnx").write_bytes(b"onnx")
    tracker = SettleTracker()
    tracker.settled(prints(scanned_version(tmp_path / "m")), T0)
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0 + 2 * SECOND_NS) == {
        tmp_path / "m" / "1"
    }


def test_folder_changing_between_polls_is_not_settled(tmp_path: Path) -> None:
    model_file = tmp_path / "m" / "1" / "model.onnx"
    model_file.parent.mkdir(parents=True)
    model_file.write_bytes(b"first half")
    tracker = SettleTracker()
    tracker.settled(prints(scanned_version(tmp_path / "m")), T0)

    with open(model_file, "ab") as handle:
        handle.write(b", second half")
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0 + 2 * SECOND_NS) == set()
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0 + 4 * SECOND_NS) == {
        model_file.parent
    }


def test_file_appearing_between_polls_is_a_change(tmp_path: Path) -> None:
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "model.onnx").write_bytes(b"onnx")
    tracker = SettleTracker()
    tracker.settled(prints(scanned_version(tmp_path / "m")), T0)
    (version / "model.onnx.sha256").write_bytes(b"")
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0 + 2 * SECOND_NS) == set()


def test_empty_version_folder_settles_after_two_polls(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    tracker = SettleTracker()
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0) == set()
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0 + 2 * SECOND_NS) == {
        tmp_path / "m" / "1"
    }


def test_folder_complete_before_the_previous_poll_is_settled_at_first_sight() -> None:
    tracker = SettleTracker()
    tracker.settled(prints(), T0)
    moved_in = folder_with_times("/repo/m/1", newest_ns=T0 - 60 * SECOND_NS)
    assert tracker.settled(prints(moved_in), T0 + 2 * SECOND_NS) == {Path("/repo/m/1")}


def test_folder_written_after_the_previous_poll_waits_for_the_next() -> None:
    tracker = SettleTracker()
    tracker.settled(prints(), T0)
    copying = folder_with_times("/repo/m/1", newest_ns=T0 + SECOND_NS)
    assert tracker.settled(prints(copying), T0 + 2 * SECOND_NS) == set()
    assert tracker.settled(prints(copying), T0 + 4 * SECOND_NS) == {Path("/repo/m/1")}


def test_file_time_just_before_the_previous_poll_is_not_trusted() -> None:
    # File times come from the kernel's coarse clock, a few ms behind
    # time.time_ns(): a file written as the poll ran can look older than it.
    tracker = SettleTracker()
    tracker.settled(prints(), T0)
    racing = folder_with_times("/repo/m/1", newest_ns=T0 - 3_000_000)
    assert tracker.settled(prints(racing), T0 + 2 * SECOND_NS) == set()


def test_folder_known_before_is_judged_by_its_fingerprint_not_its_age() -> None:
    tracker = SettleTracker()
    tracker.settled(prints(folder_with_times("/repo/m/1", T0 - 60 * SECOND_NS, size=5)), T0)
    grown = folder_with_times("/repo/m/1", T0 - 60 * SECOND_NS, size=9)
    assert tracker.settled(prints(grown), T0 + 2 * SECOND_NS) == set()


def test_something_absent_settles_once_absent_for_two_polls() -> None:
    tracker = SettleTracker()
    missing_config = {Path("/repo/m/config.pbtxt"): ()}
    assert tracker.settled(missing_config, T0) == set()
    assert tracker.settled(missing_config, T0 + 2 * SECOND_NS) == {Path("/repo/m/config.pbtxt")}


def test_something_absent_from_a_folder_renamed_into_place_settles_at_first_sight() -> None:
    tracker = SettleTracker()
    tracker.prime({}, T0)
    missing_config = {Path("/repo/m/config.pbtxt"): ()}
    renamed = {Path("/repo/m/config.pbtxt")}
    assert tracker.settled(missing_config, T0 + 2 * SECOND_NS, renamed) == renamed


def test_primed_folders_count_as_seen(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.onnx").write_bytes(b"onnx")
    tracker = SettleTracker()
    tracker.prime(prints(scanned_version(tmp_path / "m")), T0)
    assert tracker.settled(prints(scanned_version(tmp_path / "m")), T0 + 2 * SECOND_NS) == {
        tmp_path / "m" / "1"
    }


def test_removed_folder_is_forgotten() -> None:
    tracker = SettleTracker()
    folder = folder_with_times("/repo/m/1", newest_ns=T0 + 3 * SECOND_NS)
    tracker.settled(prints(folder), T0)
    tracker.settled(prints(), T0 + 2 * SECOND_NS)
    # Seen again after vanishing: first sight again, and it is newer than the last poll.
    assert tracker.settled(prints(folder), T0 + 4 * SECOND_NS) == set()
