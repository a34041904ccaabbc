"""streams/ turns camera, video and synthetic frames into inference results on
the event bus: per stream, a capture thread and an inference thread joined by a
bounded drop-oldest queue, both calling nothing below the dataplane.

Invariant: nothing a source or a model does stops a stream. A source that fails
or ends is reopened with backoff; a model that is missing, not ready or failing
is counted and logged (rate-limited) while frames keep flowing; only
``StreamManager.stop`` ends a stream. See docs/streams.md.
"""
