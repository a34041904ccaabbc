"""protocol/ turns bytes into tensors and back; it never touches a backend.

One folder per transport (``http/``, and ``grpc/`` beside it), each with its own
server, its own rendering of the dataplane's results and its own mapping from
``ErrorCode`` to its statuses. What the transports share lives here: the raw
tensor layout (``tensor_codec``: Triton's binary extension and gRPC's
``raw_input_contents`` are the same bytes), the access policy, and the
registry of system shared-memory regions both transports read and write.
"""
