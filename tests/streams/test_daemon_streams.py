"""The real daemon (``python -m edgebox serve``) with a streams config:
results in its log, and streams stopped before models unload on SIGTERM."""

from __future__ import annotations

import re

from stream_models import write_frame_model, write_video

from daemon_process import wait_for


def test_daemon_runs_configured_streams_and_stops_them_first(tmp_path, start_daemon):
    repository = tmp_path / "repo"
    write_frame_model(repository, "probe")
    video = write_video(tmp_path / "grey.avi", [120] * 10)
    config = tmp_path / "streams.yaml"
    config.write_text(
        "streams:\n"
        f"  - {{name: cam, source: '{video}', model: probe, fps: 50, log_interval_s: 0.2}}\n"
        "  - {name: gone, source: /dev/video97, model: probe}\n"
    )
    daemon = start_daemon(repository, "--config", str(config))

    wait_for(
        lambda: re.search(
            r"stream 'cam': [\d.]+ fps, frame \d+: outputs 'level', 'size' \(model 'probe' "
            r"version 1\); since the last line \d+ results, 0 failed, mean ms capture [\d.]+ "
            r"queue [\d.]+ inference [\d.]+ total [\d.]+; since start \d+ dropped, 0 failed",
            daemon.log(),
        ),
        what="a summary line for stream 'cam'",
    )
    log = daemon.log()
    assert re.search(
        r"stream 'cam': first result: model 'probe' version 1, frame 0 \(64x48\), outputs "
        r"'level', 'size', [\d.]+ ms",
        log,
    )
    assert (
        "stream 'gone': reconnecting: no such device '/dev/video97' (is the camera plugged in? "
        "`v4l2-ctl --list-devices` lists the cameras)"
    ) in log

    assert daemon.stop() == 0
    log = daemon.log()
    unloading = log.index("model 'probe' version 1: UNLOADING")
    assert re.search(r"stream 'cam': stopped \(captured \d+, inferred \d+, dropped", log)
    assert log.index("stream 'cam': stopped") < unloading
    assert log.index("stream 'gone': stopped") < unloading
    assert log.rstrip().endswith("stopped")
