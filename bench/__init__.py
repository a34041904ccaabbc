"""bench/ measures the daemon against floors taken in the same run on the same
machine (ONNX Runtime called directly, a bare loopback socket round trip) and
states its targets as ratios to them, so a noisy or slow machine moves the
floors and the daemon alike. Entry point: ``python bench/run.py``."""
