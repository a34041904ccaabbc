"""Run a generated pipeline in real GStreamer and report its first frame, as
OpenCV's ``CAP_GSTREAMER`` would take it from the appsink: for tests that
check edgebox's pipeline text (``edgebox/streams/gst_pipelines.py``) where
there is no Orin, with stand-in elements in place of NVIDIA's.

Runs under the system's ``python3`` (the one with ``python3-gi``); prints
one JSON line: ``{"width", "height", "format", "bytes"}`` or ``{"error"}``.

    /usr/bin/python3 tests/gst_first_frame.py --timeout 15 'PIPELINE'
"""

from __future__ import annotations

import argparse
import json
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402


def first_frame(pipeline_text: str, timeout_s: float) -> dict:
    Gst.init(None)
    try:
        pipeline = Gst.parse_launch(pipeline_text)
    except gi.repository.GLib.Error as error:
        return {"error": f"parse: {error.message}"}
    sinks = [e for e in _sinks(pipeline) if e.get_factory().get_name() == "appsink"]
    if len(sinks) != 1:
        return {"error": f"expected one appsink, found {len(sinks)}"}
    pipeline.set_state(Gst.State.PLAYING)
    try:
        sample = sinks[0].emit("try-pull-sample", int(timeout_s * Gst.SECOND))
        if sample is None:
            message = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
            if message is not None:
                error, _debug = message.parse_error()
                return {"error": error.message}
            return {"error": f"no frame in {timeout_s:g} s"}
        structure = sample.get_caps().get_structure(0)
        return {
            "width": structure.get_value("width"),
            "height": structure.get_value("height"),
            "format": structure.get_value("format"),
            "bytes": sample.get_buffer().get_size(),
        }
    finally:
        pipeline.set_state(Gst.State.NULL)


def _sinks(pipeline) -> list:
    found, iterator = [], pipeline.iterate_sinks()
    while True:
        result, element = iterator.next()
        if result != Gst.IteratorResult.OK:
            return found
        found.append(element)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=15.0)
    parser.add_argument("pipeline")
    args = parser.parse_args(argv)
    print(json.dumps(first_frame(args.pipeline, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
