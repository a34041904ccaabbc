"""repository/ is the control path's disk side: what the model repository holds,
what each config says, and which versions its policy selects.

Invariant: nothing here runs model code or touches a loaded model. The daemon
only reads the folder, but for ``rollback.py`` (the dashboard's rollback in
poll mode), which only renames version folders inside their model folder;
``publish.py`` (the ``edgebox publish`` command, never the daemon) is the other
writer. Both write by atomic rename.
"""
