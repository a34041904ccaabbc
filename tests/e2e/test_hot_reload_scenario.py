"""Hot reload under load (the issue's scenario): one real daemon in poll mode
with a 1 s poll, while client threads send requests without a version the whole
time.

The tests below are the steps of one scenario, run in file order on the
module's daemon, repository and load (run the module, not a single step): version 1 serves; version 2 is copied in
file by file with a pause mid-file; a broken version 3 arrives (by rename); a
good version 4 is copied in while 3 is still broken; the policy switches to
``all``; version 2 is removed; the broken version 3 is removed; the policy
switches to ``specific``; the memory of the unloaded versions is given back;
the config is edited. The last test checks the whole load: no request failed,
every answer came from a version that was READY at the time and was computed by
the version it names, and the broken version never answered.

Each version of the model answers ``Y = X + version``, so an answer says which
version computed it, independently of the ``model_version`` the daemon reports.
Each carries a 40 MB initializer, so a loaded version shows in the daemon's RSS.
When a version was READY is read from the daemon's log: the registry logs every
state change the repository index shows, with a timestamp.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import onnx
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import InferenceServerException

from daemon_process import DaemonProcess, wait_for
from scripts.onnx_builders import IR_VERSION, OPSET

MODEL = "hot"
POLL_S = 1.0
BIG_FLOATS = 10_000_000
BIG_MIB = BIG_FLOATS * 4 / 2**20
"""The initializer every version carries: 40 MB of float32."""
LOAD_THREADS = 2
LOAD_DEADLINE_S = 150.0
"""The load threads stop by themselves after this, whatever happens to the tests."""
READY_SLACK_S = 0.1
"""The registry makes a version routable, then logs READY: a request can finish in
between. Its log record can only trail by a few GIL switches."""
X = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)

CONFIG = """\
name: "hot"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{extra}"""

_STATE_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w edgebox\.lifecycle\.registry: "
    rf"model '{MODEL}' version (\d+): ([A-Z]+)",
    re.MULTILINE,
)


def build_versioned_model(path: Path, version: int) -> Path:
    """X [batch, 4] -> Y = X + version. The constant is element 0 of a 40 MB
    initializer, gathered with indices computed from X so that ONNX Runtime cannot
    fold the initializer away at load: every loaded version holds all of it."""
    big = np.zeros(BIG_FLOATS, dtype=np.float32)
    big[0] = version
    nodes = [
        helper.make_node("Mul", ["X", "zero"], ["zeros"]),
        helper.make_node("Cast", ["zeros"], ["indices"], to=TensorProto.INT64),
        helper.make_node("Gather", ["big", "indices"], ["offset"]),
        helper.make_node("Add", ["X", "offset"], ["Y"]),
    ]
    graph = helper.make_graph(
        nodes,
        f"plus_{version}",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 4])],
        [
            numpy_helper.from_array(big, "big"),
            numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def write_config(model_dir: Path, extra: str = "", max_batch_size: int = 8) -> None:
    """Replace config.pbtxt atomically, as an editor or a deploy script should:
    the poller never reads half a config (``.tmp`` names are ignored)."""
    staging = model_dir / "config.pbtxt.tmp"
    staging.write_text(CONFIG.format(max_batch_size=max_batch_size, extra=extra))
    os.replace(staging, model_dir / "config.pbtxt")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def versions_of(result) -> tuple[int, int]:
    """(the version the response names, the version its output says computed it)."""
    computed = round(float(result.as_numpy("Y")[0, 0] - X[0, 0]))
    return int(result.get_response()["model_version"]), computed


@dataclass(frozen=True)
class Answer:
    sent: float
    received: float
    served: int | None
    """``model_version`` of the response."""
    computed: int | None
    """The version the output value says computed it."""
    error: str | None


class LoadGenerator:
    """Threads sending requests without a version until stopped or past their
    deadline, each on its own client; every request is recorded as an
    ``Answer`` in one list (appends are atomic), read by the test thread."""

    def __init__(self, url: str, threads: int, deadline_s: float) -> None:
        self._url = url
        self._stop = threading.Event()
        self._deadline = time.monotonic() + deadline_s
        self._answers: list[Answer] = []
        self._threads = [
            threading.Thread(target=self._run, name=f"load-{n}", daemon=True)
            for n in range(threads)
        ]

    def start(self) -> LoadGenerator:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> list[Answer]:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        assert not any(t.is_alive() for t in self._threads), "a load thread did not stop"
        return self.answers()

    def answers(self, since: float = 0.0) -> list[Answer]:
        return [a for a in list(self._answers) if a.sent >= since]

    def served_since(self, since: float) -> set[int | None]:
        return {a.served for a in self.answers(since) if a.error is None}

    def _run(self) -> None:
        inputs = [httpclient.InferInput("X", list(X.shape), "FP32")]
        inputs[0].set_data_from_numpy(X)
        with httpclient.InferenceServerClient(self._url, network_timeout=30) as client:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                sent = time.time()
                try:
                    result = client.infer(MODEL, inputs)
                    served, computed = versions_of(result)
                    answer = Answer(sent, time.time(), served, computed, None)
                except Exception as exc:
                    answer = Answer(sent, time.time(), None, None, f"{type(exc).__name__}: {exc}")
                self._answers.append(answer)
                self._stop.wait(0.002)


@dataclass
class StateChange:
    time: float
    version: int
    state: str


def state_changes(log: str) -> list[StateChange]:
    return [
        StateChange(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp(), int(v), state)
        for stamp, v, state in _STATE_LINE.findall(log)
    ]


def serving_intervals(changes: list[StateChange]) -> dict[int, list[tuple[float, float]]]:
    """When each version was READY. A reload of a serving version logs LOADING
    while the old load keeps serving, so only UNLOADING or UNAVAILABLE ends one."""
    opened: dict[int, float] = {}
    intervals: dict[int, list[tuple[float, float]]] = {}
    for change in changes:
        if change.state == "READY":
            opened.setdefault(change.version, change.time)
        elif change.state in ("UNLOADING", "UNAVAILABLE") and change.version in opened:
            intervals.setdefault(change.version, []).append(
                (opened.pop(change.version), change.time)
            )
    for version, start in opened.items():
        intervals.setdefault(version, []).append((start, float("inf")))
    return intervals


def answered_outside_ready(answers: list[Answer], log: str) -> list[Answer]:
    """Answers from a version that was not READY at any moment while they were
    in flight (log times are truncated to the millisecond, hence the 2 ms)."""
    intervals = serving_intervals(state_changes(log))
    return [
        a
        for a in answers
        if a.error is None
        and not any(
            a.received >= start - READY_SLACK_S and a.sent <= end + 0.002
            for start, end in intervals.get(a.served, [])
        )
    ]


def describe(answers: list[Answer], limit: int = 5) -> str:
    return "\n".join(repr(a) for a in answers[:limit]) + (
        f"\n... and {len(answers) - limit} more" if len(answers) > limit else ""
    )


@dataclass
class Scenario:
    daemon: DaemonProcess
    client: httpclient.InferenceServerClient
    load: LoadGenerator
    model_dir: Path
    builds: dict[int, Path]
    """Complete model files per version, outside the repository."""
    rss: dict[str, float] = field(default_factory=dict)
    marks: dict[str, float] = field(default_factory=dict)
    """Times that one step records for a later one."""

    def log(self) -> str:
        return self.daemon.log()

    def log_since(self, offset: int) -> str:
        return self.log()[offset:]

    def index(self) -> dict[int, tuple[str, str]]:
        """Version -> (state, reason) of the model in the repository index."""
        return {
            int(entry["version"]): (entry["state"], entry["reason"])
            for entry in self.client.get_model_repository_index()
            if entry["name"] == MODEL and "version" in entry
        }

    def wait_for_states(self, expected: dict[int, str], what: str) -> dict[int, tuple[str, str]]:
        """Wait until the index shows these versions in these states (others
        may be listed too)."""
        seen: list[dict] = [{}]

        def matches() -> bool:
            seen[0] = self.index()
            return all(seen[0].get(v, ("absent",))[0] == state for v, state in expected.items())

        try:
            wait_for(matches, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the index shows {seen[0]}") from None
        return seen[0]

    def infer(self, version: str = "") -> tuple[int, int]:
        """(served version, computed version) of one request from the test thread."""
        inputs = [httpclient.InferInput("X", list(X.shape), "FP32")]
        inputs[0].set_data_from_numpy(X)
        return versions_of(self.client.infer(MODEL, inputs, model_version=version))

    def wait_until_serving(self, version: int, since: float, what: str) -> None:
        wait_for(
            lambda: version in self.load.served_since(since),
            timeout_s=30,
            what=f"unversioned requests to get version {version} ({what})",
        )

    def assert_no_failures(self, since: float) -> None:
        failed = [a for a in self.load.answers(since) if a.error is not None]
        assert not failed, f"{len(failed)} request(s) failed:\n{describe(failed)}"

    def rss_mib(self) -> float:
        return rss_mib(self.daemon.process.pid)


pytestmark = pytest.mark.daemon_flags(
    "--model-control-mode", "poll", "--repository-poll-secs", str(POLL_S)
)


@pytest.fixture(scope="module")
def builds(module_path) -> dict[int, Path]:
    return {
        v: build_versioned_model(module_path / "builds" / str(v) / "model.onnx", v)
        for v in (1, 2, 4)
    }


@pytest.fixture(scope="module")
def repository(repository, builds):
    model_dir = repository / MODEL
    (model_dir / "1").mkdir(parents=True)
    shutil.copyfile(builds[1], model_dir / "1" / "model.onnx")
    write_config(model_dir)
    return repository


@pytest.fixture(scope="module")
def scenario(daemon, builds):
    """The steps share the module's daemon, under load from the first step to
    the last (the daemon is stopped with SIGTERM after the load)."""
    client = httpclient.InferenceServerClient(daemon.url)
    load = LoadGenerator(daemon.url, LOAD_THREADS, LOAD_DEADLINE_S).start()
    try:
        yield Scenario(daemon, client, load, daemon.repository / MODEL, builds)
    finally:
        try:
            load.stop()
        finally:
            client.close()


def test_version_1_serves_at_start(scenario):
    scenario.wait_until_serving(1, 0.0, "at start")
    assert scenario.index() == {1: ("READY", "")}
    assert scenario.infer() == (1, 1)
    scenario.assert_no_failures(0.0)
    scenario.rss["one version"] = scenario.rss_mib()


def _copy_with_pause(scenario: Scenario, version: int, polls_paused: float) -> float:
    """Copy a version in file by file: a small file, then model.onnx in two
    halves with the file held open in between until the poller has seen the half
    copy and ``polls_paused`` more poll intervals have passed. Returns when the
    copy finished (the file closed)."""
    offset = len(scenario.log())
    whole = scenario.builds[version].read_bytes()
    target = scenario.model_dir / str(version)
    target.mkdir()
    (target / "VERSION.txt").write_text(f"{version}\n")
    with open(target / "model.onnx", "wb") as copy:
        copy.write(whole[: len(whole) // 2])
        copy.flush()
        seen = re.compile(rf"model '{MODEL}': [^\n]*\bversion {version}\b[^\n]* still changing")
        wait_for(
            lambda: seen.search(scenario.log_since(offset)),
            what=f"the poller to see version {version} half copied",
        )
        # The pause mid-file the scenario asks for, not synchronization.
        time.sleep(polls_paused * POLL_S)
        copy.write(whole[len(whole) // 2 :])
    return time.time()


def _loads_before(changes: list[StateChange], version: int, finished: float) -> list[str]:
    """State changes showing a load of ``version`` from a half-copied folder."""
    return [
        f"{datetime.fromtimestamp(c.time).isoformat()} version {c.version}: {c.state}"
        for c in changes
        if c.version == version
        and (c.state == "UNAVAILABLE" or (c.state == "LOADING" and c.time < finished))
    ]


def test_version_2_copied_with_a_pause_mid_file_is_not_loaded_half_written(scenario):
    scenario.marks["copy 2 started"] = time.time()
    finished = _copy_with_pause(scenario, 2, polls_paused=2.2)
    scenario.marks["copy 2 finished"] = finished
    scenario.wait_until_serving(2, finished, "after the copy finished")
    partial = _loads_before(state_changes(scenario.log()), 2, finished)
    assert not partial, (
        f"version 2 was loaded before its copy finished at "
        f"{datetime.fromtimestamp(finished).isoformat()}:\n" + "\n".join(partial)
    )


def test_version_2_serves_once_its_copy_finished(scenario):
    started, finished = scenario.marks["copy 2 started"], scenario.marks["copy 2 finished"]
    scenario.wait_until_serving(2, finished, "after the copy finished")
    scenario.wait_for_states({1: "UNAVAILABLE", 2: "READY"}, "version 1 to be unloaded")
    assert scenario.index()[2] == ("READY", "")
    assert scenario.infer() == (2, 2)
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {1, 2}


def test_broken_version_3_never_serves_and_version_2_keeps_serving(scenario):
    started = time.time()
    whole = scenario.builds[2].read_bytes()
    staging = scenario.model_dir / ".3.partial"
    staging.mkdir()
    (staging / "model.onnx").write_bytes(whole[:4096])
    staging.rename(scenario.model_dir / "3")

    wait_for(
        lambda: scenario.index().get(3, ("",))[0] == "UNAVAILABLE",
        what="version 3 to be reported UNAVAILABLE",
    )
    _, reason = scenario.index()[3]
    path = scenario.model_dir / "3" / "model.onnx"
    assert reason.startswith(f"model '{MODEL}' version 3: ONNX Runtime cannot load '{path}': ")
    assert "Protobuf parsing failed" in reason
    still_serving = ("READY", "still serving: a version selected by version_policy failed to load")
    wait_for(lambda: scenario.index()[2] == still_serving, what="version 2 to keep serving")
    with pytest.raises(
        InferenceServerException,
        match=f"^\\[503\\] Request for unknown model: '{MODEL}' version 3 is not at ready state: ",
    ):
        scenario.infer("3")
    assert scenario.infer() == (2, 2)
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {2}


def test_version_4_copied_while_3_is_broken_serves_once_complete(scenario):
    started = time.time()
    finished = _copy_with_pause(scenario, 4, polls_paused=0)
    scenario.wait_until_serving(4, finished, "with version 3 still broken")

    index = scenario.wait_for_states(
        {1: "UNAVAILABLE", 2: "UNAVAILABLE", 3: "UNAVAILABLE", 4: "READY"},
        "version 2 to be unloaded",
    )
    assert index[2] == ("UNAVAILABLE", "unloaded (not selected by version_policy)")
    assert _loads_before(state_changes(scenario.log()), 4, finished) == []
    assert scenario.infer() == (4, 4)
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {2, 4}


def test_policy_all_serves_every_good_version(scenario):
    started = time.time()
    write_config(scenario.model_dir, "version_policy: { all { } }\n")
    scenario.wait_for_states(
        {1: "READY", 2: "READY", 3: "UNAVAILABLE", 4: "READY"},
        "versions 1, 2 and 4 to be ready",
    )
    assert scenario.client.get_model_config(MODEL)["version_policy"] == {"all": {}}
    for version in (1, 2, 4):
        assert scenario.infer(str(version)) == (version, version)
    with pytest.raises(
        InferenceServerException,
        match=f"^\\[503\\] Request for unknown model: '{MODEL}' version 3 is not at ready state: ",
    ):
        scenario.infer("3")
    assert scenario.infer() == (4, 4)
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {4}
    scenario.rss["three versions"] = scenario.rss_mib()


def test_removing_version_2_keeps_the_other_versions_serving(scenario):
    started = time.time()
    shutil.rmtree(scenario.model_dir / "2")
    wait_for(
        lambda: scenario.index().get(2, ("",))[0] != "READY",
        what="the index to stop showing version 2 READY",
    )
    for version in (1, 4):
        assert scenario.infer(str(version)) == (version, version)
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {4}


def test_removed_version_2_stops_serving(scenario):
    wait_for(
        lambda: not scenario.client.is_model_ready(MODEL, "2"),
        timeout_s=3 * POLL_S,
        what="version 2, removed from disk, to stop serving",
    )
    with pytest.raises(
        InferenceServerException,
        match=f"Request for unknown model: '{MODEL}' version 2 is not ",
    ):
        scenario.infer("2")


def test_removing_the_broken_version_3_reloads_nothing_else(scenario):
    started = time.time()
    offset = len(scenario.log())
    shutil.rmtree(scenario.model_dir / "3")
    wait_for(lambda: 3 not in scenario.index(), what="version 3 to leave the index")
    for version in (1, 4):
        assert scenario.infer(str(version)) == (version, version)
    # Versions whose config and files did not change keep their load.
    assert not re.search(r"version [14]: LOADING", scenario.log_since(offset))
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {4}


def test_policy_specific_serves_only_the_listed_version(scenario):
    started = time.time()
    write_config(scenario.model_dir, "version_policy: { specific { versions: [ 1 ] } }\n")
    scenario.wait_until_serving(1, started, "after the switch to specific [1]")
    index = scenario.wait_for_states({1: "READY", 4: "UNAVAILABLE"}, "version 4 to be unloaded")
    assert index[1] == ("READY", "")
    assert index[4] == ("UNAVAILABLE", "unloaded (not selected by version_policy)")
    assert scenario.infer() == (1, 1)
    with pytest.raises(
        InferenceServerException,
        match=f"^\\[503\\] Request for unknown model: '{MODEL}' version 4 is not at ready state: ",
    ):
        scenario.infer("4")
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {1, 4}


def test_memory_of_unloaded_versions_is_freed(scenario):
    one, three = scenario.rss["one version"], scenario.rss["three versions"]
    # Two more versions loaded must show, or the check below proves nothing.
    assert three > one + 2 * 0.6 * BIG_MIB, f"RSS {one:.0f} MiB -> {three:.0f} MiB"
    freed_to = min(three - 2 * 0.6 * BIG_MIB, one + 0.75 * BIG_MIB)
    samples: list[float] = []

    def freed() -> bool:
        samples.append(scenario.rss_mib())
        return samples[-1] < freed_to

    try:
        wait_for(freed, timeout_s=10, interval_s=0.2, what="the RSS to drop")
    except AssertionError:
        raise AssertionError(
            f"RSS stayed above {freed_to:.0f} MiB: one version loaded {one:.0f} MiB, "
            f"three {three:.0f} MiB, after unloading two {samples[-1]:.0f} MiB"
        ) from None


def test_config_edit_reloads_without_failed_requests(scenario):
    started = time.time()
    offset = len(scenario.log())
    write_config(
        scenario.model_dir,
        "version_policy: { specific { versions: [ 1 ] } }\n"
        "instance_group [ { count: 2 kind: KIND_CPU } ]\n",
        max_batch_size=4,
    )

    def reloaded() -> bool:
        config = scenario.client.get_model_config(MODEL)
        return config["max_batch_size"] == 4 and config["instance_group"][0]["count"] == 2

    wait_for(
        lambda: reloaded() and "version 1: READY" in scenario.log_since(offset),
        what="version 1 to be reloaded with the edited config",
    )
    reload_done = time.time()
    scenario.wait_until_serving(1, reload_done, "after the config edit")
    assert scenario.index()[1] == ("READY", "")
    assert scenario.infer() == (1, 1)
    scenario.assert_no_failures(started)
    assert scenario.load.served_since(started) == {1}


def test_no_request_failed_and_only_ready_versions_answered(scenario):
    answers = scenario.load.stop()
    log = scenario.log()
    failed = [a for a in answers if a.error is not None]
    assert not failed, f"{len(failed)} of {len(answers)} requests failed:\n{describe(failed)}"
    mislabelled = [a for a in answers if a.served != a.computed]
    assert not mislabelled, f"answers not computed by the version named:\n{describe(mislabelled)}"
    assert {a.served for a in answers} == {1, 2, 4}, "version 3 is broken and must never answer"
    outside = answered_outside_ready(answers, log)
    assert not outside, (
        f"answers from versions that were not READY:\n{describe(outside)}\n"
        + "\n".join(str(c) for c in state_changes(log))
    )
