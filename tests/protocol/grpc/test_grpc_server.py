"""GrpcServer in process: the port it binds is its own, calls go to the
service, the message limit holds, and stop refuses new calls."""

from __future__ import annotations

import socket
import threading
import time

import grpc
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from edgebox.errors import Cancelled
from edgebox.protocol.access_policy import AccessPolicy
from edgebox.protocol.grpc.server import GrpcServer


class HealthyDataPlane:
    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        return False


@pytest.fixture
def serve():
    servers: list[GrpcServer] = []

    def start(port: int = 0, **limits) -> GrpcServer:
        server = GrpcServer(HealthyDataPlane(), None, AccessPolicy({}), "127.0.0.1", port, **limits)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(1.0)


def stub(server: GrpcServer) -> service_pb2_grpc.GRPCInferenceServiceStub:
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    return service_pb2_grpc.GRPCInferenceServiceStub(channel)


def test_port_zero_binds_a_free_port_and_serves(serve):
    server = serve()
    assert server.port > 0
    assert stub(server).ServerLive(pb.ServerLiveRequest(), timeout=10).live is True
    assert stub(server).ServerReady(pb.ServerReadyRequest(), timeout=10).ready is False


def test_a_port_in_use_is_an_error_not_a_shared_port(serve):
    first = serve()
    with pytest.raises(OSError, match=rf"gRPC: cannot listen on 127.0.0.1:{first.port}"):
        serve(first.port)


def test_a_port_held_by_another_socket_is_an_error(serve):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(OSError, match="gRPC: cannot listen on"):
            serve(holder.getsockname()[1])


def test_a_message_over_the_limit_is_refused_before_it_is_parsed(serve):
    server = serve(max_message_bytes=1024)
    request = pb.ModelInferRequest(model_name="m", raw_input_contents=[b"\0" * 2048])
    with pytest.raises(grpc.RpcError) as caught:
        stub(server).ModelInfer(request, timeout=10)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stub(server).ServerLive(pb.ServerLiveRequest(), timeout=10).live is True


def test_stop_refuses_new_calls_and_ends_the_loop(serve):
    server = serve()
    client = stub(server)
    assert client.ServerLive(pb.ServerLiveRequest(), timeout=10).live
    server.stop(1.0)
    assert not server.accepting
    with pytest.raises(grpc.RpcError) as caught:
        client.ServerLive(pb.ServerLiveRequest(), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


class WaitForCancelDataPlane(HealthyDataPlane):
    """infer() returns once its request says the client has gone (or fails
    after a deadline), and records what it saw."""

    def __init__(self) -> None:
        self.saw_cancel = threading.Event()
        self.entered = threading.Event()

    def check_servable(self, name: str, version: str = "") -> None:
        pass

    def infer(self, request, from_client=False):
        self.entered.set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if request.cancelled():
                self.saw_cancel.set()
                raise Cancelled("model 'm': the client went away")
            time.sleep(0.01)
        raise AssertionError("the request was never marked cancelled")


def test_a_call_the_client_abandons_marks_its_request_cancelled():
    dataplane = WaitForCancelDataPlane()
    server = GrpcServer(dataplane, None, AccessPolicy({}), "127.0.0.1", 0)
    server.start()
    try:
        request = pb.ModelInferRequest(model_name="m")
        with pytest.raises(grpc.RpcError) as caught:
            stub(server).ModelInfer(request, timeout=0.5)
        assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert dataplane.entered.is_set()
        assert dataplane.saw_cancel.wait(10)
    finally:
        server.stop(1.0)
