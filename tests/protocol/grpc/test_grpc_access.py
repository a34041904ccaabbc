"""gRPC access control: each RPC's API, the peer's address, refusals as
Triton words them, and the servicer applying the shared policy (loopback-only
default, API key, Triton's groups) before any work."""

from __future__ import annotations

import inspect
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from tritonclient.grpc import service_pb2 as pb

from edgebox.protocol.access_policy import APIS, AccessPolicy, Denial, parse_restrictions
from edgebox.protocol.grpc.access import (
    API_OF_METHOD,
    grpc_policy,
    metadata_of,
    peer_address,
    refusal,
)
from edgebox.protocol.grpc.service import InferenceService
from fakes.fake_grpc_context import FakeAbort, FakeGrpcContext

KEY = "0123456789abcdef0123"
REMOTE = "ipv4:192.0.2.7:51000"


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.1:5555", "127.0.0.1"),
        ("ipv4:192.0.2.7:80", "192.0.2.7"),
        ("ipv6:[::1]:5555", "::1"),
        ("ipv6:%5B::1%5D:5555", "::1"),
        ("ipv6:[::ffff:127.0.0.1]:5555", "::ffff:127.0.0.1"),
        ("unix:/run/edgebox.sock", ""),
        ("", ""),
        ("garbage", ""),
    ],
)
def test_peer_string_becomes_the_clients_address(peer, address):
    assert peer_address(peer) == address


def test_every_rpc_of_the_service_has_an_api():
    methods = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods_by_name
    assert set(API_OF_METHOD) == set(methods)
    assert set(API_OF_METHOD.values()) <= set(APIS)


def test_first_of_repeated_metadata_counts_and_binary_values_are_left_out():
    pairs = (("Admin-Key", "one"), ("admin-key", "two"), ("trace-bin", b"\x00"))
    assert metadata_of(pairs) == {"admin-key": "one"}


def test_group_refusal_is_tritons_status_and_text():
    assert refusal(Denial("model-repository", "triton-grpc-protocol-admin-key")) == (
        grpc.StatusCode.UNAVAILABLE,
        "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'",
    )


def test_loopback_only_refusal_says_how_to_open_the_api():
    assert refusal(Denial("model-repository", None)) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "API 'model-repository' is only served to clients on this machine (loopback); to allow "
        "other clients set 'api_key_file' (they send the key in metadata 'edgebox-api-key') or "
        "restrict it with --grpc-restricted-protocol=model-repository:<key>=<value>",
    )


def test_policy_from_settings_reads_the_key_and_prefixes_group_keys(tmp_path: Path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    policy = grpc_policy(["statistics:admin-key=s3cret"], key_file)
    assert policy.api_key == KEY
    assert policy.check("statistics", {"admin-key": "s3cret"}, "127.0.0.1") == Denial(
        "statistics", "triton-grpc-protocol-admin-key"
    )
    assert policy.check("statistics", {"triton-grpc-protocol-admin-key": "s3cret"}, "") is None


class UnusedDataPlane:
    """Any call means a refused request reached the dataplane."""

    def __getattr__(self, name):
        raise AssertionError(f"refused call reached DataPlane.{name}")


def call(policy: AccessPolicy, method: str, request, context: FakeGrpcContext):
    with ThreadPoolExecutor(1) as pool:
        service = InferenceService(UnusedDataPlane(), UnusedDataPlane(), policy, pool)
        answer = getattr(service, method)(request, context)
        # A stream's checks run when grpc takes its first answer.
        return list(answer) if inspect.isgenerator(answer) else answer


def refused(policy: AccessPolicy, method: str, request, context: FakeGrpcContext) -> FakeAbort:
    with pytest.raises(FakeAbort) as caught:
        call(policy, method, request, context)
    return caught.value


def prefixed(specs, api_key=None) -> AccessPolicy:
    return AccessPolicy(parse_restrictions(specs), api_key, header_prefix="triton-grpc-protocol-")


def test_repository_api_is_refused_to_a_remote_peer_without_a_key():
    abort = refused(
        prefixed([]),
        "RepositoryModelLoad",
        pb.RepositoryModelLoadRequest(model_name="m"),
        FakeGrpcContext(REMOTE),
    )
    assert abort.code is grpc.StatusCode.PERMISSION_DENIED
    assert abort.details.startswith("API 'model-repository' is only served to clients on this")


def test_repository_api_wants_the_key_from_a_remote_peer_when_one_is_set():
    abort = refused(
        prefixed([], KEY),
        "RepositoryIndex",
        pb.RepositoryIndexRequest(),
        FakeGrpcContext(REMOTE, [("edgebox-api-key", "wrong-key-wrong-key")]),
    )
    assert (abort.code, abort.details) == (
        grpc.StatusCode.UNAVAILABLE,
        "This protocol is restricted, expecting header 'edgebox-api-key'",
    )


@pytest.mark.parametrize(
    ("method", "request_message"),
    [
        ("SystemSharedMemoryRegister", pb.SystemSharedMemoryRegisterRequest(name="r")),
        ("CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest()),
        ("TraceSetting", pb.TraceSettingRequest()),
        ("LogSettings", pb.LogSettingsRequest()),
    ],
)
def test_other_loopback_only_apis_are_refused_to_a_remote_peer(method, request_message):
    abort = refused(prefixed([]), method, request_message, FakeGrpcContext(REMOTE))
    assert abort.code is grpc.StatusCode.PERMISSION_DENIED


def test_restricted_inference_is_refused_even_from_loopback_before_any_work():
    abort = refused(
        prefixed(["inference:admin-key=s3cret"]),
        "ModelInfer",
        pb.ModelInferRequest(model_name="m"),
        FakeGrpcContext(metadata=[("admin-key", "s3cret")]),
    )
    assert (abort.code, abort.details) == (
        grpc.StatusCode.UNAVAILABLE,
        "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'",
    )


def test_restricted_health_is_served_with_the_prefixed_metadata():
    class LiveDataPlane(UnusedDataPlane):
        def live(self) -> bool:
            return True

    with ThreadPoolExecutor(1) as pool:
        service = InferenceService(
            LiveDataPlane(), UnusedDataPlane(), prefixed(["health:admin-key=s3cret"]), pool
        )
        context = FakeGrpcContext(metadata=[("triton-grpc-protocol-admin-key", "s3cret")])
        answer = service.ServerLive(pb.ServerLiveRequest(), context)
    assert answer.live is True
