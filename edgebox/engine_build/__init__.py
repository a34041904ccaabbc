"""engine_build/ is ``edgebox build-engine``: it turns an ONNX file into a
TensorRT engine on the device that will run it, and publishes the engine as a
new model version.

Invariant: the repository is written only through ``repository/publish.py``,
so a polling daemon sees either no new version or a complete one (engine,
``engine_build.json`` and, for INT8, the calibration cache); the sidecar's
keys are the TensorRT backend's (``backends/tensorrt/compatibility.py``), so
what is written is what a load reads. Only ``builder.py`` and
``calibration.py`` touch TensorRT objects, and only ``device.py`` and
``calibration.py`` touch pycuda; both modules are handed in as parameters,
never imported at module level, so everything here runs and is tested without
a GPU. The daemon never imports this package.
"""
