"""python/ runs Triton python-backend models (``model.py``) unchanged, in-process.

A ``model.py`` written for Triton imports ``triton_python_backend_utils`` and
defines ``TritonPythonModel``; this package supplies that module and drives the
class's ``auto_complete_config`` / ``initialize`` / ``execute`` / ``finalize``.
Invariant: nothing the user's code does (raise, return the wrong thing) escapes
as an exception into the request path; every request gets exactly one result.
"""

from edgebox.backends.python.runner import Backend

__all__ = ["Backend"]
