"""python/ runs Triton python-backend models (``model.py``) unchanged, in the
daemon's process or, per model, in a process of their own (``isolation.py``).

A ``model.py`` written for Triton imports ``triton_python_backend_utils`` and
defines ``TritonPythonModel``; this package supplies that module and drives the
class's ``auto_complete_config`` / ``initialize`` / ``execute`` / ``finalize``.
In the daemon: ``runner`` (load order), ``model_import``, ``instance``,
``event_loop``, ``output_ownership``. In a process of its own: ``isolated``
(supervision), ``model_process`` and ``isolated_child`` (the two ends),
``channel``, ``tensor_region``, ``isolated_messages``, ``isolated_bls``. The
custom metrics models count live in ``custom_metrics/``.

Invariant: nothing the user's code does (raise, return the wrong thing, or,
when isolated, crash its process) escapes as an exception into the request
path; every request gets exactly one result (a decoupled one: exactly one
final).
"""

from edgebox.backends.python.backend import Backend

__all__ = ["Backend"]
