"""protocol/ turns bytes into the dataplane's requests and its typed answers
back into bytes, one folder per transport (``http/``, ``grpc/``), each with
its own server, its own rendering of the results, its own ``error_map`` from
``ErrorCode`` to its statuses, and a ``wiring`` module that builds it from the
settings for the daemon. What the transports share lives here: the raw tensor
layout (``tensor_codec``: Triton's binary extension and gRPC's
``raw_input_contents`` are the same bytes), the access policy, the registry
of system shared-memory regions both transports read and write, and the
audit line of a repository load or unload.

Invariant: a transport calls the verbs of ``DataPlane`` and
``RepositoryControl`` and nothing below them: no backend, scheduler,
lifecycle manager or registry, and no model logic. Only the daemon builds a
transport; commands reach a running daemon through the HTTP transport's client
end, ``http/daemon_client`` (``tests/test_layering.py``).
"""
