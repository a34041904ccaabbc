"""Telemetry: what the module is doing (GPU, CPU, memory, temperatures, power),
sampled on a thread of its own into a bounded ring, never on a request path.
Read by the dashboard, Prometheus and MQTT; written only by the sampler."""
