"""mqtt/ publishes the daemon's events, results and retained status to a
broker (docs/mqtt.md): one thread takes events off the bus, routes them to
topics (routing.py), keeps them in the spool (spool.py: memory, then a file
for what the broker does not acknowledge in time) and sends them over one
connection at a time (session.py), reconnecting on its own (reconnect.py).

Invariant: nothing here runs on a request or stream thread, which only put
events on the bus; a message leaves the spool only once the broker
acknowledged it, and its topic, epoch and seq name it alone. mqtt/ reads the
daemon through the dataplane, lifecycle registry and stream settings, never
the other way round.
"""
