"""scheduling/ sits between the dataplane and the backends: it decides which
instance runs a request and when, and keeps each version's statistics.

Schedulers are synchronous: ``infer`` runs on the caller's thread and returns
the response, so a plain pipeline (HTTP thread -> instance) costs no thread
hand-off. Ensembles, like Triton's ``ensemble_scheduler/``, live here, so no
backend ever calls back up into the dataplane.
"""
