"""The fleet agent: signed desired state over MQTT, reconciled on the device (docs/fleet.md)."""
