"""One module per alert rule, each the same shape (``base.Rule``): events
observed as they arrive, findings judged at the evaluator's pace."""
