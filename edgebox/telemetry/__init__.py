"""Telemetry: what the module is doing (GPU, CPU, memory, temperatures, power),
sampled on a thread of its own into a bounded ring, never on a request path.
Read by the dashboard, Prometheus and MQTT; written only by the sampler.

Invariant: imports only the foundation (errors, events, log_limiter); readers
take a root path and degrade a missing sensor to None instead of raising.
source.py is the contract, each ``*_source`` one hardware domain's reader,
choice.py picks one.
"""
