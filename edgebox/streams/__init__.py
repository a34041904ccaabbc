"""streams/ turns camera, video and synthetic frames into inference results on
the event bus: per stream, a capture thread and an inference thread joined by a
bounded drop-oldest queue.

Invariant: it reaches models only through the dataplane (``infer``,
``model_metadata``, ``model_config``) and otherwise imports only the
foundation (events, errors, tensors, summaries, backoff, log_limiter,
secrets_mask); never ``edgebox.settings``, the layers under the dataplane, or
the observers above it (mqtt, metrics, dashboard). Only the daemon runs
streams (``StreamManager``); other packages import only ``settings``
(``StreamSettings``: the settings loader, and mqtt for each stream's topic)
and ``latest_frames`` (the dashboard).

Nothing a source or a model does stops a stream. A source that fails or ends
is reopened with backoff; a model that is missing, not ready or failing is
counted and logged (rate-limited) while frames keep flowing; only
``StreamManager.stop`` ends a stream. OpenCV is imported only when a source
that needs it opens. See docs/streams.md.
"""
