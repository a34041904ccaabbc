"""KServe v2 over HTTP, with Triton's extensions: the server (an epoll thread
and a worker pool), the routes, JSON and binary tensor codecs, access control.

Every endpoint calls the dataplane; only ``error_map.py`` knows HTTP statuses.
"""
