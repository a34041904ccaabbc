"""The inference service put on the server as the generated code does, but
with ``ModelInfer`` taking and giving bytes (``raw_messages``), so the
tensors skip protobuf's copies. Every other method, streams included, keeps
the generated (de)serialisers."""

from __future__ import annotations

from collections.abc import Callable

import grpc
from tritonclient.grpc import service_pb2_grpc

RAW_METHOD = "ModelInfer"


class _Registrar:
    """Stands in for the server while the generated ``add_..._to_server``
    runs: the handler table it registers is passed on with ``ModelInfer``'s
    entry replaced."""

    def __init__(self, server, raw_infer: Callable) -> None:
        self._server = server
        self._raw_infer = raw_infer
        self.generic: list = []
        self.registered = False

    def add_generic_rpc_handlers(self, handlers) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        table = dict(handlers)
        table[RAW_METHOD] = grpc.unary_unary_rpc_method_handler(self._raw_infer)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, table),)
        )
        self._server.add_registered_method_handlers(service, table)
        self.registered = True


def add_inference_service(service, server) -> bool:
    """Register ``service`` (an ``InferenceService``) on ``server``; whether
    ``ModelInfer`` got the bytes path (generated code older than grpcio
    1.63 registers no table to swap into, and keeps protobuf's)."""
    registrar = _Registrar(server, service.ModelInferRaw)
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(service, registrar)
    if not registrar.registered:
        server.add_generic_rpc_handlers(tuple(registrar.generic))
    return registrar.registered
