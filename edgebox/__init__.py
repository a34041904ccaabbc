"""edgebox: a Triton-compatible inference appliance for NVIDIA Jetson Orin."""

__version__ = "0.1.0"
