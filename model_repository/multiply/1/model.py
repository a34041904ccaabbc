"""Elementwise product, written exactly as for Triton's python backend."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        output = pb_utils.get_output_config_by_name(config, "PRODUCT")
        self.output_dtype = pb_utils.triton_string_to_numpy(output["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            product = pb_utils.Tensor("PRODUCT", np.multiply(a, b).astype(self.output_dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[product]))
        return responses
