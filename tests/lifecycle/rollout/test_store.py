"""The rollout record on disk: what it keeps across a restart, how it names a
version, and what a damaged file or a refusing disk do to it."""

from __future__ import annotations

from edgebox.lifecycle.rollout.store import TRUSTED_KEPT, Hold, RolloutStore, Trial, files_digest


def test_holds_trials_and_trust_survive_a_restart(tmp_path):
    path = tmp_path / "rollout.json"
    store = RolloutStore(path)
    store.trust("m", 1, "aaa")
    store.begin_trial("m", 2, Trial("bbb", 0, 10.0))
    store.hold("m", 3, Hold("ccc", "rejected", "rollout: 0/50 answers agree", 11.0))
    again = RolloutStore(path)
    assert again.trusted("m", 1, "aaa") and not again.trusted("m", 1, "other")
    assert again.trials("m") == {("m", 2): Trial("bbb", 0, 10.0)}
    assert again.holds("m") == {3: Hold("ccc", "rejected", "rollout: 0/50 answers agree", 11.0)}
    assert again.release("m") == [3] and RolloutStore(path).holds("m") == {}


def test_trust_ends_the_trial_and_only_the_newest_are_kept(tmp_path):
    store = RolloutStore(tmp_path / "rollout.json")
    store.begin_trial("m", 9, Trial("d9", 1, 0.0))
    for version in range(1, 10):
        store.trust("m", version, f"d{version}")
    assert store.trials("m") == {}
    assert sorted(store.trusted_versions("m")) == list(range(10 - TRUSTED_KEPT, 10))


def test_a_version_is_named_by_its_files_not_its_folder_time():
    files = (("model.py", 10, 1, 2),)
    assert files_digest(((".", 0, 5, 5), *files)) == files_digest(((".", 0, 9, 9), *files))
    assert files_digest(files) != files_digest((("model.py", 11, 1, 2),))


def test_a_damaged_file_is_set_aside_and_the_daemon_starts_without_it(tmp_path, caplog):
    path = tmp_path / "rollout.json"
    path.write_text('{"models": {"m": {"held": {"2": {"digest": 1}}}}}')
    store = RolloutStore(path)
    assert store.holds("m") == {}
    assert (tmp_path / "rollout.json.corrupt").exists()
    assert "not readable" in caplog.text


def test_a_disk_that_refuses_the_write_keeps_the_record_in_memory(tmp_path, caplog):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the directory should be")
    store = RolloutStore(blocked / "rollout.json")
    store.hold("m", 2, Hold("d", "quarantined", "why", 1.0))
    store.hold("m", 3, Hold("d", "quarantined", "why", 1.0))
    assert sorted(store.holds("m")) == [2, 3]
    assert caplog.text.count("cannot write") == 1
