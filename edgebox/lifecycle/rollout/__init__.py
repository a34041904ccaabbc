"""Safe rollout of a new model version on the device: shadow and canary
traffic judged by gates, promotion with a watch window and automatic
rollback, and crash quarantine across restarts (docs/rollout.md).

Invariant: the serving version never stops serving while a new one proves
itself, and a version that was rejected, rolled back or crashed the daemon
does not serve again until its files change or an operator releases it.
"""
