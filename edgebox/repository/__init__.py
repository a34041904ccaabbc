"""repository/ is the control path's disk side: what the model repository holds,
what each config says, and which versions its policy selects.

Invariant: nothing here runs model code or touches a loaded model. The daemon
only reads the folder; ``publish.py`` (the ``edgebox publish`` command, never
the daemon) is the one writer, and it writes by atomic rename.
"""
