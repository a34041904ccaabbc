"""Frame -> lane_detector input, written as for Triton's python backend.

Outputs the frame's (height, width) too, so post-processing can put the lanes
back into the frame's own pixels whatever the camera's resolution.
"""

import json

import cv2
import numpy as np
import triton_python_backend_utils as pb_utils

MODEL_HEIGHT, MODEL_WIDTH = 360, 640


def to_model_input(frame: np.ndarray, dtype=np.float32) -> np.ndarray:
    """[H, W, 3] uint8 BGR -> [1, 3, 360, 640] RGB scaled to [0, 1]."""
    height, width = frame.shape[:2]
    shrinking = width > MODEL_WIDTH or height > MODEL_HEIGHT
    resized = cv2.resize(
        frame, (MODEL_WIDTH, MODEL_HEIGHT),
        interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR,
    )
    rgb = cv2.cvtColor(resized, cv2.COLOR_BGR2RGB)
    tensor = np.empty((1, 3, MODEL_HEIGHT, MODEL_WIDTH), dtype)
    np.multiply(rgb.transpose(2, 0, 1), 1.0 / 255.0, out=tensor[0], casting="unsafe")
    return tensor


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        output = pb_utils.get_output_config_by_name(config, "input")
        self.dtype = pb_utils.triton_string_to_numpy(output["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            frame = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
            if frame.shape[0] < 2 or frame.shape[1] < 2:
                # The client's mistake, so a 400 (INVALID_ARG), as Triton's examples answer.
                error = pb_utils.TritonError(
                    f"lane_preprocess: 'image' must be a frame of at least 2x2 pixels, "
                    f"got shape {list(frame.shape)}",
                    pb_utils.TritonError.INVALID_ARG,
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            tensor = pb_utils.Tensor("input", to_model_input(frame, self.dtype))
            size = pb_utils.Tensor("frame_size", np.array(frame.shape[:2], np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor, size]))
        return responses
