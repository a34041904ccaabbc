"""python/ runs Triton python-backend models (``model.py``) unchanged, in the
daemon's process or, per model, in a process of their own (``isolation.py``).

A ``model.py`` written for Triton imports ``triton_python_backend_utils`` and
defines ``TritonPythonModel``; this package supplies that module and drives the
class's ``auto_complete_config`` / ``initialize`` / ``execute`` / ``finalize``.
Invariant: nothing the user's code does (raise, return the wrong thing, or,
when isolated, crash its process) escapes as an exception into the request
path; every request gets exactly one result.
"""

from edgebox.backends.python.backend import Backend

__all__ = ["Backend"]
