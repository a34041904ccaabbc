"""Open ModelStreamInfer streams that send nothing never take the threads
other calls are answered on: more of them than the daemon has gRPC threads
(across several connections, each within its stream cap) still leave every
other call answered. A design in which streams share the unary calls' handler
threads (grpc's synchronous server with one pool) fails this."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from model_fixtures import add_sub_infer_inputs

THREADS = 2
STREAMS_PER_CONNECTION = 4
CONNECTIONS = 4


def test_idle_streams_beyond_the_thread_count_stall_no_other_call(add_sub_repository, start_daemon):
    daemon = start_daemon(
        add_sub_repository,
        "--grpc-thread-count",
        str(THREADS),
        "--grpc-max-concurrent-streams",
        str(STREAMS_PER_CONNECTION),
    )
    # Separate subchannel pools: each channel is its own TCP connection.
    options = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.insecure_channel(daemon.grpc_url, options=options) for _ in range(CONNECTIONS)]
    release = threading.Event()
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    request = pb.ModelInferRequest(model_name="add_sub", id="first")
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        request.raw_input_contents.append(a.tobytes())

    def one_request_then_nothing():
        yield request
        release.wait(30)

    streams = [
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(
            one_request_then_nothing()
        )
        for channel in channels
        for _ in range(STREAMS_PER_CONNECTION)
    ]
    try:
        # Each stream has been served once, so the server holds all of them open.
        with ThreadPoolExecutor(len(streams)) as readers:
            firsts = [readers.submit(next, stream) for stream in streams]
            for first in firsts:
                assert first.result(timeout=10).infer_response.id == "first"
        fresh = grpcclient.InferenceServerClient(daemon.grpc_url, channel_args=options)
        assert fresh.is_server_live(client_timeout=5)
        inputs = add_sub_infer_inputs(grpcclient, a, a)
        result = fresh.infer("add_sub", inputs, client_timeout=5)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
    finally:
        release.set()
        for stream in streams:
            stream.cancel()
        for channel in channels:
            channel.close()
