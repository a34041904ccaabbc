"""Rollouts through the real manager, python models and dataplane: a new
version proves itself on the requests the serving one answers, then is
promoted, rejected or rolled back, and what was decided survives a restart."""

from __future__ import annotations

import re
import threading

import pytest

from daemon_process import wait_for
from edgebox.errors import InvalidArgument, NotFound
from edgebox.events import RolloutPromoted, RolloutRejected, RolloutRolledBack, RolloutStarted
from edgebox.lifecycle.states import ModelState
from edgebox.repository.rollout_policy import policy_from_mapping
from edgebox.tensors import InferRequest, Tensor
from rollout_models import (
    FAILING,
    RIGHT,
    SLOW,
    SWAPPED,
    add_sub_inputs,
    add_sub_py,
    drop_version,
    fails_after,
)


class Traffic:
    """Requests to the default version, one a millisecond, on a thread of
    their own until stopped: what each version answered, and how many
    answers were wrong. The pace is a client's, not a synchronisation:
    without a pause an in-process loop would hold the interpreter lock
    nearly all the time, which no client over a socket does."""

    def __init__(self, stack) -> None:
        self._stack = stack
        self.answered: dict[str, int] = {}
        self.wrong = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            try:
                version, right = self._stack.add_sub()
            except Exception:
                self.failed += 1
                continue
            self.answered[version] = self.answered.get(version, 0) + 1
            self.wrong += not right


def _second_version(stack, tmp_path, body: str):
    """add_sub version 1 serving, then version 2 running ``body`` copied in
    and loaded: in rollout, or serving, as the stack's policy says."""
    model_dir = add_sub_py(tmp_path / "models")
    stack.manager.load_model("add_sub")
    drop_version(model_dir, 2, body)
    stack.manager.load_model("add_sub")
    return model_dir


def _reason(stack, version: int) -> str:
    status = stack.state("add_sub", version)
    return status.reason if status is not None else ""


def _state(stack, version: int):
    status = stack.state("add_sub", version)
    return status.state if status is not None else None


def test_an_identical_version_is_promoted_and_the_previous_one_unloads_after_the_watch(
    rollout_stack, tmp_path
):
    stack = rollout_stack(policy="shadow", samples=10, watch_s=0.2)
    _second_version(stack, tmp_path, RIGHT)
    assert _state(stack, 2) is ModelState.LOADING
    assert _reason(stack, 2).startswith("rollout: shadow, waiting for live traffic, 0/10")
    with Traffic(stack) as traffic:
        wait_for(lambda: _state(stack, 2) is ModelState.READY, 20, what="promotion")
        wait_for(lambda: _state(stack, 1) is ModelState.UNAVAILABLE, 20, what="version 1 gone")
    assert traffic.wrong == 0 and traffic.failed == 0
    assert _reason(stack, 2).startswith("rollout: promoted (10/10 answers agree")
    assert set(stack.registry.served_versions("add_sub")) == {2}
    kinds = [type(e) for e in iter(lambda: stack.events.get(0), None)]
    assert kinds[0] is RolloutStarted and RolloutPromoted in kinds
    assert stack.rollouts.status("add_sub")["last"]["result"] == "promoted"


def test_a_wrong_version_is_rejected_and_never_answers_a_client(rollout_stack, tmp_path):
    stack = rollout_stack(policy="shadow", samples=20)
    model_dir = add_sub_py(tmp_path / "models")
    stack.manager.load_model("add_sub")
    with Traffic(stack) as traffic:
        drop_version(model_dir, 2, SWAPPED)
        stack.manager.load_model("add_sub")
        wait_for(lambda: _state(stack, 2) is ModelState.UNAVAILABLE, 20, what="rejection")
    assert traffic.wrong == 0 and set(traffic.answered) == {"1"}
    assert re.fullmatch(
        r"rollout: 0/\d+ answers agree \(OUTPUT0 max \|diff\| 4\.0 > atol 1e-05; "
        r"min_agreement 0\.95\)",
        _reason(stack, 2),
    ), _reason(stack, 2)
    assert stack.rollouts.status("add_sub")["held"][0]["kind"] == "rejected"
    assert any(isinstance(e, RolloutRejected) for e in iter(lambda: stack.events.get(0), None))

    # A restart (or the next poll) does not load it again: the old version serves.
    stack = rollout_stack(policy="shadow", samples=20)
    stack.manager.load_models()
    assert set(stack.registry.served_versions("add_sub")) == {1}
    assert _reason(stack, 2).startswith("rollout: 0/")


def test_a_slow_version_fails_the_latency_gate(rollout_stack, tmp_path):
    stack = rollout_stack(policy="shadow", samples=10)
    _second_version(stack, tmp_path, SLOW)
    with Traffic(stack):
        wait_for(lambda: _state(stack, 2) is ModelState.UNAVAILABLE, 30, what="rejection")
    assert re.match(
        r"rollout: p95 latency \d+\.\d+ ms > 1\.5 x \d+\.\d+ ms \+ 1 ms", _reason(stack, 2)
    ), _reason(stack, 2)


def test_a_canary_that_fails_is_rolled_back_after_its_share_of_requests(rollout_stack, tmp_path):
    stack = rollout_stack(policy="canary", canary_percent=20, samples=10)
    _second_version(stack, tmp_path, FAILING)
    with Traffic(stack) as traffic:
        wait_for(lambda: _state(stack, 2) is ModelState.UNAVAILABLE, 20, what="rejection")
    # The canary took every fifth request until its first failure stopped it.
    assert traffic.failed == 1
    assert traffic.answered["1"] >= 4
    assert _reason(stack, 2).startswith("rollout: 1/1 requests failed on the new version")
    assert "this version is broken" in _reason(stack, 2)
    assert set(stack.registry.served_versions("add_sub")) == {1}


def test_a_canary_answers_its_share_and_is_promoted(rollout_stack, tmp_path):
    stack = rollout_stack(policy="canary", canary_percent=20, samples=10, watch_s=60)
    _second_version(stack, tmp_path, RIGHT)
    answered = [stack.add_sub()[0] for _ in range(50)]
    assert answered.count("2") == 10
    assert all(answered[i] == "2" for i in range(4, 50, 5))
    wait_for(lambda: _state(stack, 2) is ModelState.READY, 20, what="promotion")
    assert stack.rollouts.status("add_sub")["stage"] == "watching"


def test_a_canary_gets_its_share_of_requests_that_were_checked_before_they_ran(
    rollout_stack, tmp_path
):
    # HTTP and gRPC check a model is servable before reading a request: that
    # look must not spend the canary's turn (30 % would become 40 %).
    stack = rollout_stack(policy="canary", canary_percent=30, samples=100, watch_s=60)
    _second_version(stack, tmp_path, RIGHT)
    answered = []
    for _ in range(50):
        stack.dataplane.check_servable("add_sub", "")
        answered.append(stack.add_sub()[0])
    assert answered.count("2") == 15


def test_a_promoted_version_that_starts_failing_is_rolled_back_in_its_watch_window(
    rollout_stack, tmp_path
):
    stack = rollout_stack(policy="shadow", samples=10, watch_s=60)
    _second_version(stack, tmp_path, fails_after(30))
    with Traffic(stack):
        wait_for(
            lambda: stack.rollouts.status("add_sub").get("last", {}).get("result") == "rolled_back",
            20,
            what="rollback",
        )
    assert set(stack.registry.served_versions("add_sub")) == {1}
    assert stack.add_sub() == ("1", True)
    held = stack.rollouts.status("add_sub")["held"]
    assert held[0]["kind"] == "rolled_back" and "broke after 30 calls" in held[0]["reason"]
    kinds = [type(e) for e in iter(lambda: stack.events.get(0), None)]
    assert kinds.index(RolloutPromoted) < kinds.index(RolloutRolledBack)


def test_a_rollback_in_poll_mode_parks_the_new_folder_and_deletes_nothing(rollout_stack, tmp_path):
    stack = rollout_stack(park=True, policy="shadow", samples=10, watch_s=60)
    model_dir = _second_version(stack, tmp_path, fails_after(15))
    with Traffic(stack):
        wait_for(
            lambda: (model_dir / ".rolled-back" / "2" / "model.py").exists(), 30, what="parking"
        )
    assert not (model_dir / "2").exists()
    assert stack.rollouts.status("add_sub")["held"] == []


def test_without_traffic_the_reason_says_the_rollout_waits(rollout_stack, tmp_path):
    stack = rollout_stack(policy="shadow", samples=50)
    _second_version(stack, tmp_path, RIGHT)
    assert _reason(stack, 2) == "rollout: shadow, waiting for live traffic, 0/50 samples"
    assert _reason(stack, 1) == "serving while version 2 is in rollout"
    # Neither a poll nor an explicit request reaches the candidate.
    stack.manager.load_model("add_sub")
    with pytest.raises(Exception, match="version 2 is not at ready state: LOADING: rollout"):
        stack.add_sub(version="2")


def test_an_operator_promotes_aborts_and_releases(rollout_stack, tmp_path):
    stack = rollout_stack(policy="shadow", samples=1000)
    _second_version(stack, tmp_path, SWAPPED)
    stack.control.rollout_action("add_sub", "abort")
    assert _reason(stack, 2) == "rollout: aborted by the operator"
    with pytest.raises(InvalidArgument, match="no rollout in progress"):
        stack.control.rollout_action("add_sub", "promote")
    status = stack.control.rollout_action("add_sub", "release")
    assert status["stage"] == "shadow" and status["version"] == 2
    stack.control.rollout_action("add_sub", "promote")
    assert _state(stack, 2) is ModelState.READY
    assert stack.add_sub()[0] == "2"
    with pytest.raises(NotFound):
        stack.control.rollout_action("add_sub", "release")
    with pytest.raises(InvalidArgument, match="expected one of promote, abort, release"):
        stack.control.rollout_action("add_sub", "delete")


def test_a_restart_during_a_rollout_serves_the_trusted_version_first(rollout_stack, tmp_path):
    stack = rollout_stack(policy="shadow", samples=1000, watch_s=0)
    model_dir = add_sub_py(tmp_path / "models")
    stack.manager.load_model("add_sub")
    wait_for(lambda: not stack.rollouts.trials.on_trial("add_sub", 1), 10, what="trust")
    drop_version(model_dir, 2, RIGHT)
    stack.manager.load_model("add_sub")

    stack = rollout_stack(policy="shadow", samples=1000)
    stack.manager.load_models()
    assert set(stack.registry.served_versions("add_sub")) == {1}
    assert _state(stack, 2) is ModelState.LOADING
    assert stack.add_sub() == ("1", True)


def test_a_model_can_override_the_device_default(rollout_stack, tmp_path):
    stack = rollout_stack(policy="shadow")
    model_dir = add_sub_py(tmp_path / "models", rollout="immediate")
    stack.manager.load_model("add_sub")
    drop_version(model_dir, 2, SWAPPED)
    stack.manager.load_model("add_sub")
    assert stack.add_sub() == ("2", False)


def test_an_operator_rolls_back_a_watched_version(rollout_stack, tmp_path):
    stack = rollout_stack(policy="shadow", samples=1000, watch_s=600)
    _second_version(stack, tmp_path, RIGHT)
    stack.control.rollout_action("add_sub", "promote")
    assert stack.add_sub()[0] == "2"
    status = stack.control.rollout_action("add_sub", "abort")
    assert status["last"]["result"] == "rolled_back"
    assert status["last"]["reason"] == "rolled back to version 1: by the operator"
    assert stack.add_sub() == ("1", True)


class _Final:
    """A stream's sink keeping its final outcome."""

    def __init__(self) -> None:
        self.outcome = None

    def send(self, response, final: bool) -> None:
        if final:
            self.outcome = response


def test_a_canary_answering_streamed_requests_is_judged_by_them(rollout_stack, tmp_path):
    stack = rollout_stack(policy="canary", canary_percent=20, samples=10)
    _second_version(stack, tmp_path, FAILING)
    a, b = add_sub_inputs()
    outcomes = []
    for _ in range(10):
        sink = _Final()
        request = InferRequest(
            "add_sub", [Tensor("INPUT0", "FP32", a), Tensor("INPUT1", "FP32", b)]
        )
        stack.dataplane.infer_stream(request, sink)
        outcomes.append(sink.outcome)
    failures = [o for o in outcomes if isinstance(o, Exception)]
    assert len(failures) == 1 and "this version is broken" in str(failures[0])
    wait_for(lambda: _state(stack, 2) is ModelState.UNAVAILABLE, 20, what="rejection")


def test_a_fleet_override_rolls_out_in_shadow_a_model_whose_config_says_immediate(
    rollout_stack, tmp_path
):
    stack = rollout_stack(policy="immediate")
    model_dir = add_sub_py(tmp_path / "models", rollout="immediate")
    stack.manager.load_model("add_sub")
    stack.rollouts.set_policy_override(
        "add_sub", policy_from_mapping({"policy": "shadow", "samples": 30})
    )
    drop_version(model_dir, 2, SWAPPED)
    stack.manager.load_model("add_sub")
    assert _state(stack, 2) is ModelState.LOADING
    assert _reason(stack, 2).startswith("rollout: shadow, waiting for live traffic, 0/30")
    assert stack.add_sub() == ("1", True)


def test_clearing_the_override_gives_the_model_its_own_policy_again(rollout_stack, tmp_path):
    stack = rollout_stack(policy="immediate")
    model_dir = add_sub_py(tmp_path / "models", rollout="immediate")
    stack.manager.load_model("add_sub")
    stack.rollouts.set_policy_override("add_sub", policy_from_mapping({"policy": "shadow"}))
    stack.rollouts.set_policy_override("other_model", policy_from_mapping({"policy": "canary"}))
    stack.rollouts.set_policy_override("add_sub", None)
    drop_version(model_dir, 2, SWAPPED)
    stack.manager.load_model("add_sub")
    assert stack.add_sub() == ("2", False)
