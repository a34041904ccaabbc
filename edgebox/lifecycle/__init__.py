"""lifecycle/ is the control path's memory side: which versions are loaded,
their state and reason, and swapping them without dropping a request.

Invariant: a version takes traffic only once all its instances loaded and its
warm-up ran, and is closed only after its last in-flight request returned;
``manager.py`` and its helpers are the only writers of the registry. Nothing
here imports the dataplane, protocol/, dashboard/, mqtt/ or metrics/; they
learn of changes through the event bus, and the dataplane's ``infer`` is
handed in for ensembles and BLS calls.
"""
