"""repository/ is the control path's disk side: what the model repository holds,
what each config says, and which versions its policy selects.

Invariant: nothing here runs model code or touches a loaded model; it only reads
the folder and reports.
"""
