"""``edgebox selftest``: what a technician runs on a freshly flashed device
and the first thing support asks for. Each check says pass, fail, warn,
"not on this machine" (hardware or software the check needs is absent where
it is not expected, never a pass) or "not configured"; the command exits
non-zero when any check fails."""
