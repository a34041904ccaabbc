"""Test doubles; each says what it fakes in its name."""
