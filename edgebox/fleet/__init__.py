"""The fleet: devices reconciling towards a signed desired state (docs/fleet.md)."""
