"""What a real Triton 2.51 answered, pinned once for the tests that compare
edgebox with it over HTTP and gRPC."""

from __future__ import annotations

LOG_DEFAULTS = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
}
"""``GET /v2/logging`` on a fresh server."""

TRACE_DEFAULTS = {
    "trace_level": ["OFF"],
    "trace_rate": "1000",
    "trace_count": "-1",
    "log_frequency": "0",
    "trace_file": "",
    "trace_mode": "triton",
}
"""``GET /v2/trace/setting`` on a fresh server."""

UNLOAD_SCENARIOS = [
    (["load ens1"], {"a", "b", "ens1"}),
    (["load ens1", "unload ens1"], {"a", "b"}),
    (["load ens1", "unload ens1 dependents"], set()),
    (["load ens1", "load ens2", "unload ens1 dependents"], {"a", "ens2"}),
    (["load a", "load ens1", "unload ens1 dependents"], {"a"}),
    (["load ens1", "unload a"], {"b"}),
]
"""Explicit model control on a repository of python models ``a`` and ``b``
and ensembles ``ens1`` (a then b) and ``ens2`` (a alone), each scenario from
a fresh start: the models READY in ``POST /v2/repository/index`` afterwards.
Loading an ensemble loads its steps; ``unload_dependents`` unloads the steps
nothing else uses and nobody loaded by name; unloading a step unloads the
ensembles that use it."""
