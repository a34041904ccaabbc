"""caching/ holds Triton's response cache: answers to earlier requests, kept
by a hash of the model, its version and everything in the request that can
change the answer, so an identical request is answered without running the
model (``--cache-config local,size=N`` plus ``response_cache { enable: true }``
in the model's config).

Invariant: a cached answer is immutable. Its arrays are copies made at
insertion and marked read-only, every hit gets fresh ``Tensor`` objects over
them, and a key's entry is never replaced, so no later request, model or
transport can change what another request is answered with. Nothing here
imports the dataplane, a transport, a scheduler or a backend: the dataplane
decides what is cached and counts hits and misses in the version's
statistics.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/response_cache.md
"""
