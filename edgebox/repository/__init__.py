"""repository/ is the control path's disk side: what the model repository
holds, what each config says (parsed, normalized and checked against
Triton's rules), what its entries may be named, and which versions a policy
selects.

Invariant: nothing here runs model code or touches a loaded model, and
nothing here imports a layer above the foundation (no lifecycle, scheduling,
backends, dataplane or transport): the lifecycle, the backends and the
commands read the repository through this package, never the other way
round. The daemon only reads the folder, but for ``rollback.py`` (the
dashboard's rollback in poll mode), which only renames version folders
inside their model folder; ``publish.py`` (the ``edgebox publish`` command,
never the daemon) is the other writer. Both write by atomic rename.
"""
