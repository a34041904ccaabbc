"""KServe v2 over HTTP, with Triton's extensions: the HTTP/1.1 server (an I/O
thread and a worker pool: ``server``, ``connection``, ``request_reader``), the
routes (``v2_handlers`` and the ``*_ext`` modules), the JSON and binary tensor
codecs, access control, and ``wiring``, which builds the service from the
settings; and ``daemon_client``, the other end, through which commands such as
``edgebox rollout`` call a running daemon.

Invariant: every endpoint answers by calling a dataplane or repository
control verb and rendering its result; only ``error_map`` turns an
``ErrorCode`` into an HTTP status, and nothing outside this folder knows HTTP
statuses.
"""
