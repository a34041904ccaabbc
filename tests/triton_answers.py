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
