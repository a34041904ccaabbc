"""protocol/ turns bytes into tensors and back; it never touches a backend.

Every endpoint calls the dataplane; only ``error_map.py`` knows HTTP statuses.
"""
