"""The key a request is cached under: a 256-bit BLAKE2b digest of everything
that can change its answer.

Triton hashes the model's name and version and each input's name and bytes
(``TritonCache::Hash``, 64 bits). edgebox hashes more, so that two requests
share an entry only when the model would answer both alike:

- what the version was loaded from, so a version reloaded with new files
  (edgebox's poll mode, a repository load) starts with no entries;
- each input's datatype and shape, not only its bytes (Triton 2.51 answers
  a ``[4, 1]`` request to a model with variable dimensions from the entry of
  a ``[1, 4]`` one with the same bytes);
- the outputs asked for, in order (Triton answers a request for OUTPUT1 alone
  with both outputs when the entry was made for both);
- the request's parameters, which a python model can read, but for those
  that only steer how the answer travels or is scheduled
  (``IGNORED_PARAMETERS``).

Per-output parameters (``binary_data``, shared-memory placement,
``classification``) are not hashed: they shape the answer after the cache
(the dataplane classifies a hit as it classifies a fresh answer). Where an
input's bytes come from (the body, shared memory) makes no difference, as in
Triton. Every field is length-prefixed, so no two different requests hash
the same stream of bytes.
"""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np

from edgebox.tensors import InferRequest, serialize_bytes

IGNORED_PARAMETERS = frozenset({"binary_data_output", "priority", "timeout"})
"""Request parameters that change how an answer is encoded or when it is
computed, never what it is."""

_COUNT = struct.Struct("<Q")


def request_key(
    model_name: str, model_version: str, request: InferRequest, loaded_from: object = ()
) -> bytes:
    """The cache key of ``request`` to version ``model_version`` (the version
    that answers, never "" for the default) of ``model_name``; ``loaded_from``
    tells one load of that version from another (the lifecycle's config digest
    and folder fingerprint), so a version reloaded from new files never
    answers from the old files' entries."""
    digest = hashlib.blake2b(digest_size=32)
    _text(digest, model_name)
    _text(digest, model_version)
    _text(digest, repr(loaded_from))
    inputs = sorted(request.inputs, key=lambda tensor: tensor.name)
    digest.update(_COUNT.pack(len(inputs)))
    for tensor in inputs:
        _text(digest, tensor.name)
        _text(digest, tensor.datatype)
        shape = tensor.data.shape
        digest.update(_COUNT.pack(len(shape)))
        digest.update(struct.pack(f"<{len(shape)}q", *shape))
        _data(digest, tensor.data, tensor.datatype)
    digest.update(_COUNT.pack(len(request.outputs)))
    for output in request.outputs:
        _text(digest, output.name)
    parameters = {
        key: value for key, value in request.parameters.items() if key not in IGNORED_PARAMETERS
    }
    _text(digest, json.dumps(parameters, sort_keys=True, default=repr))
    return digest.digest()


def _text(digest, text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    digest.update(_COUNT.pack(len(raw)))
    digest.update(raw)


def _data(digest, data: np.ndarray, datatype: str) -> None:
    if datatype == "BYTES" or data.dtype.kind in ("O", "S", "U"):
        raw = serialize_bytes(data)
        digest.update(_COUNT.pack(len(raw)))
        digest.update(raw)
        return
    contiguous = np.ascontiguousarray(data)
    digest.update(_COUNT.pack(contiguous.nbytes))
    digest.update(contiguous)
