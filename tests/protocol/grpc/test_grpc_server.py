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

from daemon_process import wait_for
from edgebox.errors import Cancelled, NotFound
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

    def start(port: int = 0, dataplane=None, **limits) -> GrpcServer:
        dataplane = dataplane or HealthyDataPlane()
        server = GrpcServer(dataplane, None, AccessPolicy({}), "127.0.0.1", port, **limits)
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


class NoModelDataPlane(HealthyDataPlane):
    """Every stream request is answered at once with an error: the stream
    stays open, its request answered."""

    def check_servable(self, name: str, version: str = "") -> None:
        raise NotFound(f"model '{name}' is not here")


def open_answered_stream(channel: grpc.Channel, release: threading.Event):
    def one_request_then_wait():
        yield pb.ModelInferRequest(model_name="absent", id="first")
        release.wait(30)

    stream = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(
        one_request_then_wait()
    )
    return stream


def test_streams_past_the_per_client_bound_are_refused_and_unary_calls_still_answered(serve):
    server = serve(
        dataplane=NoModelDataPlane(), thread_count=1, max_streams=8, max_streams_per_client=2
    )
    release = threading.Event()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        held = [open_answered_stream(channel, release) for _ in range(2)]
        for stream in held:
            assert next(stream).infer_response.id == "first"
        refused = open_answered_stream(channel, release)
        with pytest.raises(grpc.RpcError) as caught:
            next(refused)
        assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--grpc-max-streams-per-client" in caught.value.details()
        client = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert client.ServerLive(pb.ServerLiveRequest(), timeout=5).live
        held[0].cancel()
        wait_for(lambda: server.service.stream_slots.open == 1, 10, what="the slot back")
        again = open_answered_stream(channel, release)
        assert next(again).infer_response.id == "first"
        again.cancel()
    finally:
        release.set()
        channel.close()


def test_stop_ends_an_open_stream_unavailable_after_its_answers(serve):
    server = serve(dataplane=NoModelDataPlane())
    release = threading.Event()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        stream = open_answered_stream(channel, release)
        assert next(stream).infer_response.id == "first"
        server.begin_stop(5.0)
        with pytest.raises(grpc.RpcError) as caught:
            next(stream)
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "shutting down" in caught.value.details()
    finally:
        release.set()
        channel.close()


class NeverFinalFirstDataPlane(HealthyDataPlane):
    """A decoupled model that never sends the final of request 'hang' and
    answers every other request at once (with an error, which is a final)."""

    def check_servable(self, name: str, version: str = "") -> None:
        pass

    def infer_stream(self, request, sink) -> None:
        if request.id != "hang":
            sink.send(NotFound(f"answered {request.id}"), True)


def test_a_stream_whose_request_never_ends_frees_its_reader_when_the_client_leaves(serve):
    # One request in flight per stream and one reader thread in all: the
    # first stream's reader waits for a slot its never-ending request holds.
    server = serve(
        dataplane=NeverFinalFirstDataPlane(),
        thread_count=1,
        max_streams=1,
        max_streams_per_client=1,
    )
    release = threading.Event()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    client = service_pb2_grpc.GRPCInferenceServiceStub(channel)

    def requests(*ids):
        for request_id in ids:
            yield pb.ModelInferRequest(model_name="m", id=request_id)
        release.wait(30)

    try:
        first = client.ModelStreamInfer(requests("hang", "second", "third"))
        wait_for(lambda: server.service.stream_slots.open == 1, 10, what="the first stream")
        first.cancel()
        wait_for(lambda: server.service.stream_slots.open == 0, 10, what="its slot back")
        again = client.ModelStreamInfer(requests("fourth"), timeout=10)
        assert next(again).error_message.endswith("answered fourth")
        again.cancel()
    finally:
        release.set()
        channel.close()
