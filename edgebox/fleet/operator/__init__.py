"""The operator's side of the fleet (``edgebox fleet ...``): read what the
group's devices report, build and sign the next desired state, publish it wave
by wave and watch the devices converge.

It runs on an operator's machine, never on a device, and talks only to the
broker: everything it knows about the fleet comes from retained messages, so
it holds no state of its own between runs.
"""
