"""protocol/grpc/ serves KServe v2's ``inference.GRPCInferenceService`` as
Triton does, through the generated code ``tritonclient.grpc`` ships
(``service_pb2``, ``service_pb2_grpc``). One exception, for speed: unary
``ModelInfer`` takes and gives bytes, its tensor fields walked by hand
(``raw_messages``) and the rest left to protobuf.

A second transport, not a second server. Invariant: every RPC calls the verb
the matching HTTP route calls (the dataplane's, or repository control's),
errors keep their ``ErrorCode`` (mapped to gRPC statuses in ``error_map``
alone) and their message text, raw tensor bytes go through the shared
``tensor_codec``, and access is the shared ``AccessPolicy`` with Triton's
``triton-grpc-protocol-<key>`` metadata.
Spec: https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/grpc_predict_v2.proto
and Triton's grpc_service.proto.
"""
