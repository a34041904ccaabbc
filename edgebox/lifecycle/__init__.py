"""lifecycle/ is the control path's memory side: which versions are loaded,
their state and reason, and swapping them without dropping a request.

Invariant: a version takes traffic only once all its instances loaded, and is
closed only after its last in-flight request returned. Nothing here imports
protocol/, dashboard/ or mqtt/; they learn of changes through the event bus.
"""
