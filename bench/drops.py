"""Issue 3, measurement 2: from ``edgebox publish`` returning to the first
inference answered by the new version, with the daemon in poll mode.

A daemon of its own (``--model-control-mode poll --repository-poll-secs 1``)
serves one LaneATT-shaped model, ``lane_drop``, whose config has a
``model_warmup`` (zero data, batch 1, ``WARMUP_COUNT`` runs), so each load
includes its warm-up. Each drop publishes the next version with the command
line (``python -m edgebox publish model.onnx --model lane_drop --repository
REPO``, the atomic drop) and then calls ``infer`` through ``tritonclient.http``
in a bounded loop (a short pause between calls) until an answer carries the new
``model_version``. The pause before each publish steps through one poll
interval, so the drops land at different points of the poller's cycle.

The pieces come from the daemon's log, whose lines carry millisecond
timestamps (the daemon and this process share the clock): the poll that first
saw the version (``still changing; waiting``), the poll that took it
(``LOADING``), and ``READY`` once the session exists and the warm-up ran. The
same load is also measured in this process (session creation plus the warm-up
runs, ONNX Runtime only) as a floor.

After the published versions come ``CONTROL_DROPS`` versions dropped with a
plain ``os.rename`` of a hidden folder written before the daemon started, whose
files are therefore old: the case the settle check takes at first sight.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tritonclient.http as httpclient

from scripts.onnx_builders import LANE_ANCHORS, LANE_INPUT_SHAPE, LANE_VALUES, build_lane_model

MODEL = "lane_drop"
POLL_SECS = 1.0
WARMUP_COUNT = 5
PAUSE_S = 0.005
"""Between two ``infer`` calls of the waiting loop, leaving the daemon's load
some CPU."""
CLOCK_MARGIN_S = 1.0
"""``edgebox.repository.settle.CLOCK_MARGIN_NS``, restated for the report."""
CONTROL_DROPS = 2
"""Versions dropped after the published ones by renaming a hidden folder that
was written before the daemon started: the settle check's first-sight case,
for comparison. Not part of the target."""

_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+: (.*)$")
_EVENTS = (
    ("seen", re.compile(rf"^model '{MODEL}': version (\d+) still changing; waiting$")),
    ("loading", re.compile(rf"^model '{MODEL}' version (\d+): LOADING$")),
    ("ready", re.compile(rf"^model '{MODEL}' version (\d+): READY")),
)


def config() -> str:
    dims = ", ".join(map(str, LANE_INPUT_SHAPE))
    return (
        f'name: "{MODEL}"\n'
        'platform: "onnxruntime_onnx"\n'
        "max_batch_size: 8\n"
        f'input [ {{ name: "input" data_type: TYPE_FP32 dims: [ {dims} ] }} ]\n'
        f'output [ {{ name: "predict_lanes" data_type: TYPE_FP32 '
        f"dims: [ {LANE_ANCHORS}, {LANE_VALUES} ] }} ]\n"
        "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
        "model_warmup [ {\n"
        '  name: "zeros"\n'
        "  batch_size: 1\n"
        f'  inputs {{ key: "input" value: {{ data_type: TYPE_FP32 dims: [ {dims} ] '
        "zero_data: true } }\n"
        f"  count: {WARMUP_COUNT}\n"
        "} ]\n"
    )


def prepare(out: Path, drops: int) -> tuple[Path, dict[int, Path], dict[int, Path]]:
    """A fresh repository with version 1; the files versions 2.. will be
    published from (each ``vN/model.onnx``, weights seeded by N); and the
    control versions after them, staged as hidden folders in the model folder
    (``.staged-N``, ignored by the daemon until renamed). All written before
    the daemon starts."""
    repository, sources = out / "repository", out / "sources"
    for folder in (repository, sources):
        shutil.rmtree(folder, ignore_errors=True)
    build_lane_model(repository / MODEL / "1" / "model.onnx", seed=1)
    (repository / MODEL / "config.pbtxt").write_text(config())
    files = {
        n: build_lane_model(sources / f"v{n}" / "model.onnx", seed=n) for n in range(2, drops + 2)
    }
    staged = {
        n: build_lane_model(repository / MODEL / f".staged-{n}" / "model.onnx", seed=n).parent
        for n in range(drops + 2, drops + 2 + CONTROL_DROPS)
    }
    return repository, files, staged


def daemon_args() -> list[str]:
    return ["--model-control-mode", "poll", "--repository-poll-secs", str(POLL_SECS)]


def load_floor(model_path: Path, repeats: int) -> dict:
    """Session creation and ``WARMUP_COUNT`` zero-data runs in this process,
    with the daemon's session options; median of ``repeats``."""
    create, warm = [], []
    zeros = np.zeros((1, *LANE_INPUT_SHAPE), dtype=np.float32)
    for _ in range(repeats):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        start = time.perf_counter()
        session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        created = time.perf_counter()
        for _ in range(WARMUP_COUNT):
            session.run(None, {"input": zeros})
        warm.append(time.perf_counter() - created)
        create.append(created - start)
        del session
    return {
        "session_create_ms": round(statistics.median(create) * 1e3, 1),
        "warmup_ms": round(statistics.median(warm) * 1e3, 1),
        "warmup_runs": WARMUP_COUNT,
    }


def measure(
    url: str,
    repository: Path,
    files: dict[int, Path],
    staged: dict[int, Path],
    log_path: Path,
    log: Callable[[str], None] = print,
) -> tuple[dict, list]:
    """Every drop in ``files`` in turn, then the ``staged`` controls; returns
    (figures, [target tuple])."""
    image = np.zeros((1, *LANE_INPUT_SHAPE), dtype=np.float32)
    tensor = httpclient.InferInput("input", list(image.shape), "FP32")
    tensor.set_data_from_numpy(image, binary_data=True)
    outputs = [httpclient.InferRequestedOutput("predict_lanes", binary_data=True)]
    client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=60)
    floor = load_floor(files[min(files)], 3)
    log(
        f"  load in-process (ONNX Runtime only): session {floor['session_create_ms']:.1f} ms "
        f"+ {WARMUP_COUNT} warm-up runs {floor['warmup_ms']:.1f} ms"
    )
    drops: list[dict] = []
    attempt_s: list[float] = []
    try:

        def serving() -> str:
            before = time.perf_counter()
            result = client.infer(MODEL, [tensor], outputs=outputs)
            attempt_s.append(time.perf_counter() - before)
            return str(result.get_response()["model_version"])

        if serving() != "1":
            raise RuntimeError(f"model '{MODEL}' does not serve version 1 at start")
        for index, (number, source) in enumerate(sorted(files.items())):
            time.sleep(POLL_SECS * index / len(files))
            drops.append(_drop(number, "publish", _publisher(source, repository, number), serving))
        for index, (number, folder) in enumerate(sorted(staged.items())):
            time.sleep(POLL_SECS * (index + 0.5) / len(staged))
            rename = _renamer(folder, repository / MODEL / str(number))
            drops.append(_drop(number, "rename", rename, serving))
    finally:
        client.close()
    events = _events(log_path)
    for drop in drops:
        _compose(drop, events.get(drop["version"], {}), repository)
    for drop in drops:
        log(_drop_line(drop))
    attempt = statistics.median(attempt_s)
    for drop in drops:
        drop["target_s"] = _round(POLL_SECS + drop["load_s"] + attempt if drop["load_s"] else None)
    published = [d for d in drops if d["how"] == "publish"]
    controls = [d for d in drops if d["how"] == "rename"]
    figures = {
        "poll_secs": POLL_SECS,
        "clock_margin_s": CLOCK_MARGIN_S,
        "warmup": f"zero_data, batch 1, count {WARMUP_COUNT}",
        "infer_attempt_ms": round(attempt * 1e3, 1),
        "pause_between_attempts_ms": PAUSE_S * 1e3,
        "load_in_process": floor,
        "drops": drops,
    }
    print_table(drops, attempt, floor)
    return figures, [target(published, controls, attempt)]


def _publisher(source: Path, repository: Path, number: int) -> Callable[[], None]:
    def publish() -> None:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "edgebox",
                "publish",
                str(source),
                "--model",
                MODEL,
                "--repository",
                str(repository),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("EDGEBOX_")},
        )
        if done.returncode != 0 or f"version {number} " not in done.stdout:
            raise RuntimeError(
                f"publish of version {number} failed ({done.returncode}): "
                f"{done.stdout}{done.stderr}"
            )

    return publish


def _renamer(staged: Path, target: Path) -> Callable[[], None]:
    return lambda: os.rename(staged, target)


def _drop(number: int, how: str, action: Callable[[], None], serving: Callable[[], str]) -> dict:
    started = time.time()
    action()
    returned = time.time()
    deadline = returned + 4 * POLL_SECS + 30
    attempts, errors, old = 0, 0, 0
    answered = None
    while time.time() < deadline:
        try:
            version = serving()
        except Exception:
            errors += 1
            time.sleep(PAUSE_S)
            continue
        attempts += 1
        if version == str(number):
            answered = time.time()
            break
        old += 1
        time.sleep(PAUSE_S)
    if answered is None:
        raise RuntimeError(f"version {number} not served {deadline - returned:.0f} s after {how}")
    return {
        "version": number,
        "how": how,
        "publish_started": started,
        "publish_returned": returned,
        "publish_s": round(returned - started, 3),
        "first_answer": answered,
        "measured_s": round(answered - returned, 3),
        "infer_calls": attempts,
        "answers_from_old_version": old,
        "failed_requests": errors,
    }


def _events(log_path: Path) -> dict[int, dict[str, float]]:
    """version -> {'seen', 'loading', 'ready'} -> epoch seconds (first of each)."""
    found: dict[int, dict[str, float]] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        for name, pattern in _EVENTS:
            event = pattern.match(match.group(2))
            if event:
                stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
                found.setdefault(int(event.group(1)), {}).setdefault(name, stamp.timestamp())
    return found


def _compose(drop: dict, events: dict[str, float], repository: Path) -> None:
    """The drop's pieces, in seconds; None where the log has no line. Log
    times are truncated to the millisecond."""
    returned = drop["publish_returned"]
    seen, loading, ready = (events.get(k) for k in ("seen", "loading", "ready"))
    first_poll = seen if seen is not None else loading
    drop["taken_at_first_sight"] = seen is None and loading is not None
    drop["first_poll_after_publish_s"] = _round(first_poll - returned if first_poll else None)
    drop["second_poll_s"] = _round(loading - seen if seen and loading else None)
    drop["load_s"] = _round(ready - loading if ready and loading else None)
    drop["ready_to_answer_s"] = _round(drop["first_answer"] - ready if ready else None)
    newest = _newest_time(repository / MODEL / str(drop["version"]))
    drop["files_newest_before_return_s"] = _round(returned - newest)
    drop["file_age_at_first_poll_s"] = _round(first_poll - newest if first_poll else None)
    for key in ("publish_started", "publish_returned", "first_answer"):
        drop[key] = round(drop[key], 3)


def _newest_time(folder: Path) -> float:
    """Newest mtime or ctime among the version folder's files and the folder's
    own mtime: what the settle check compares with the previous poll."""
    stamps = [folder.stat().st_mtime_ns]
    for path in folder.rglob("*"):
        stat = path.stat()
        stamps += [stat.st_mtime_ns, stat.st_ctime_ns]
    return max(stamps) / 1e9


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.0f}"


def _drop_line(drop: dict) -> str:
    return (
        f"  drop v{drop['version']} ({drop['how']}): took {_ms(drop['publish_s'])} ms, "
        f"first poll +{_ms(drop['first_poll_after_publish_s'])} ms, "
        + (
            f"second poll +{_ms(drop['second_poll_s'])} ms, "
            if drop["second_poll_s"] is not None
            else "taken at first sight, "
        )
        + f"load {_ms(drop['load_s'])} ms, "
        f"answer +{_ms(drop['ready_to_answer_s'])} ms = {_ms(drop['measured_s'])} ms"
    )


def print_table(drops: list[dict], attempt_s: float, floor: dict) -> None:
    print(
        f"\nversion drops, poll interval {POLL_SECS:g} s, warm-up {WARMUP_COUNT} runs; ms "
        "from the drop returning"
        f"\n{'ver':>4} {'how':<8}{'took':>6}{'1st poll':>10}{'2nd poll':>10}{'load':>7}"
        f"{'answer':>8}{'measured':>10}{'target':>8}{'file age':>10}  first sight"
    )
    for drop in drops:
        print(
            f"{drop['version']:>4} {drop['how']:<8}{_ms(drop['publish_s']):>6}"
            f"{_ms(drop['first_poll_after_publish_s']):>10}{_ms(drop['second_poll_s']):>10}"
            f"{_ms(drop['load_s']):>7}{_ms(drop['ready_to_answer_s']):>8}"
            f"{_ms(drop['measured_s']):>10}{_ms(drop['target_s']):>8}"
            f"{_ms(drop['file_age_at_first_poll_s']):>10}  "
            f"{'yes' if drop['taken_at_first_sight'] else 'no'}"
        )
    print(
        "how: publish = `python -m edgebox publish` (took: its run time, a new Python process);\n"
        "rename = control, os.rename of a hidden folder written before the daemon started.\n"
        "1st poll: drop returned -> the poll that first saw the version; 2nd poll: -> the poll\n"
        "that took it (LOADING), '-' when the first took it; load: LOADING -> READY (session +\n"
        "warm-up); answer: READY -> first answer from the new version (one infer takes "
        f"{attempt_s * 1e3:.0f} ms,\n{PAUSE_S * 1e3:g} ms pause between). "
        "target: poll interval + load + one infer.\n"
        "file age: first poll - newest file time. First sight needs the files older than the\n"
        f"previous poll by {CLOCK_MARGIN_S:g} s: a file age at the first poll above one poll "
        f"cycle + {CLOCK_MARGIN_S:g} s (about {POLL_SECS + CLOCK_MARGIN_S:g} s).\n"
        f"In-process load floor: session {floor['session_create_ms']:.1f} ms + warm-up "
        f"{floor['warmup_ms']:.1f} ms.\n"
    )


def target(published: list[dict], controls: list[dict], attempt_s: float):
    """(name, passed, text, ratio): every published drop within poll interval +
    its load (with warm-up) + one infer call."""
    measured = [d["measured_s"] for d in published]
    valid = [(d["measured_s"], d["target_s"]) for d in published if d["target_s"] is not None]
    within = sum(m <= t for m, t in valid)
    worst = max(m / t for m, t in valid) if len(valid) == len(published) else float("inf")
    loads = [d["load_s"] for d in published if d["load_s"] is not None]
    second = [d["second_poll_s"] for d in published if d["second_poll_s"] is not None]
    first_sight = sum(bool(d["taken_at_first_sight"]) for d in published)
    median_target = statistics.median(t for _, t in valid) if valid else float("nan")
    control = ""
    if controls:
        taken = sum(bool(d["taken_at_first_sight"]) for d in controls)
        control = (
            f"; control drops by renaming old files: {taken} of {len(controls)} taken at first "
            f"sight, {_range_ms([d['measured_s'] for d in controls])}"
        )
    text = (
        f"{within} of {len(published)} published drops within poll interval {POLL_SECS:g} s + "
        f"load (median {statistics.median(loads) * 1e3:.0f} ms incl. {WARMUP_COUNT} warm-up runs) "
        f"+ one infer ({attempt_s * 1e3:.0f} ms) = {median_target * 1e3:.0f} ms; measured "
        f"{_range_ms(measured)}; {first_sight} of {len(published)} taken at first sight, the "
        f"others waited for a second poll ({_median_ms(second)} after the first){control}"
    )
    return (
        f"version drop -> first answer by it <= poll interval ({POLL_SECS:g} s) + load + warm-up",
        within == len(published),
        text,
        round(worst, 3),
    )


def _range_ms(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1e3:.0f} ms, "
        f"range {min(values) * 1e3:.0f}-{max(values) * 1e3:.0f} ms"
    )


def _median_ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:.0f} ms" if values else "none"
