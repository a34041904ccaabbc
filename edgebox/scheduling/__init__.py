"""scheduling/ sits between the dataplane and the backends on the request
path: it decides which instance runs a request and when (direct, dynamic and
sequence batching, decoupled, ensembles), and keeps each version's
statistics.

Invariant: a scheduler sends every request exactly one final response, an
error included, whatever its instance does; and nothing here imports the
lifecycle, the repository, the dataplane or a transport: schedulers are built
by the lifecycle with what they need handed in. Ensembles, like Triton's
``ensemble_scheduler/``, live here and call their steps through a function
handed in at load, so no backend ever calls back up into the dataplane.
Direct and ensemble scheduling run on the caller's thread, so a plain
pipeline (HTTP thread -> instance) costs no thread hand-off; the batchers
hand requests to one worker thread per instance (``batch_workers.py``).
"""
