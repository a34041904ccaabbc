"""The dataplane's non-infer verbs answer with typed, frozen results that any
transport can render: HTTP's JSON and gRPC's messages are both built from them
without going back through a dict."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from edgebox import __version__
from edgebox.dataplane import EXTENSIONS
from edgebox.dataplane_results import (
    ModelConfig,
    ModelMetadata,
    RepositoryIndexEntry,
    ServerMetadata,
    StatisticDuration,
    TensorMetadata,
    VersionStatistics,
)
from edgebox.errors import EdgeboxError, InvalidArgument
from edgebox.lifecycle.states import ModelState
from edgebox.tensors import InferRequest, Tensor
from model_fixtures import add_add_sub, write_model


@pytest.fixture
def loaded(tmp_path, stack):
    add_add_sub(tmp_path, versions=(1, 2))
    add_add_sub(tmp_path, "idle")
    write_model(tmp_path, "bad", "name: {")
    stack.manager.load_model("add_sub")
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("bad")
    return stack.dataplane


def _infer(dataplane, batch: int) -> None:
    data = np.zeros((batch, 16), dtype=np.float32)
    dataplane.infer(
        InferRequest("add_sub", [Tensor("INPUT0", "FP32", data), Tensor("INPUT1", "FP32", data)])
    )


def test_server_metadata_is_typed(loaded):
    assert loaded.server_metadata() == ServerMetadata("edgebox", __version__, tuple(EXTENSIONS))


def test_model_metadata_is_typed_and_frozen(loaded):
    metadata = loaded.model_metadata("add_sub")
    assert metadata == ModelMetadata(
        name="add_sub",
        versions=("2",),
        platform="onnxruntime_onnx",
        inputs=(
            TensorMetadata("INPUT0", "FP32", (-1, 16)),
            TensorMetadata("INPUT1", "FP32", (-1, 16)),
        ),
        outputs=(
            TensorMetadata("OUTPUT0", "FP32", (-1, 16)),
            TensorMetadata("OUTPUT1", "FP32", (-1, 16)),
        ),
        notes=(),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        metadata.name = "other"  # type: ignore[misc]


def test_model_config_is_a_copy_of_the_served_message(loaded):
    config = loaded.model_config("add_sub")
    assert isinstance(config, ModelConfig)
    assert (config.name, config.max_batch_size) == ("add_sub", 8)
    config.max_batch_size = 1
    assert loaded.model_config("add_sub").max_batch_size == 8


def test_statistics_fill_grpc_model_statistics_without_a_dict(loaded):
    _infer(loaded, 3)
    (entry,) = loaded.statistics("add_sub")
    assert isinstance(entry, VersionStatistics)
    assert (entry.name, entry.version) == ("add_sub", "2")
    counts = entry.counts
    assert (counts.inference_count, counts.execution_count) == (3, 1)
    assert counts.inference_stats.success.count == 1
    assert [b.batch_size for b in counts.batch_stats] == [3]

    def duration(d: StatisticDuration) -> service_pb2.StatisticDuration:
        return service_pb2.StatisticDuration(count=d.count, ns=d.ns)

    phases = counts.inference_stats
    message = service_pb2.ModelStatistics(
        name=entry.name,
        version=entry.version,
        last_inference=counts.last_inference_ms,
        inference_count=counts.inference_count,
        execution_count=counts.execution_count,
        inference_stats=service_pb2.InferStatistics(
            **{f.name: duration(getattr(phases, f.name)) for f in dataclasses.fields(phases)}
        ),
        batch_stats=[
            service_pb2.InferBatchStatistics(
                batch_size=b.batch_size,
                compute_input=duration(b.compute_input),
                compute_infer=duration(b.compute_infer),
                compute_output=duration(b.compute_output),
            )
            for b in counts.batch_stats
        ],
    )
    assert message.inference_stats.compute_infer.count == 1
    assert message.batch_stats[0].batch_size == 3
    assert message.last_inference == counts.last_inference_ms > 0


def test_statistics_list_served_versions_and_none_for_a_model_that_failed(loaded):
    assert [(e.name, e.version) for e in loaded.statistics()] == [("add_sub", "2")]
    assert loaded.statistics("add_sub", "2")[0].version == "2"
    with pytest.raises(InvalidArgument, match=r"^requested model 'bad' is not available$"):
        loaded.statistics("bad")
    with pytest.raises(InvalidArgument, match=r"^requested model 'idle' is not available$"):
        loaded.statistics("idle")
    with pytest.raises(
        InvalidArgument,
        match=r"^requested model version is not available for model 'add_sub'$",
    ):
        loaded.statistics("add_sub", "1")


def test_repository_index_is_typed_entries(tmp_path, loaded, stack):
    ready, bad, idle = stack.repository_control.repository_index()
    assert ready == RepositoryIndexEntry("add_sub", "2", ModelState.READY, "")
    assert (bad.name, bad.version, bad.state) == ("bad", None, ModelState.UNAVAILABLE)
    assert bad.reason == f"{tmp_path}/bad/config.pbtxt:1:7: 'name: {{': " + (
        "Expected string but found: '{'"
    )
    assert idle == RepositoryIndexEntry("idle")
    assert stack.repository_control.repository_index(ready_only=True) == [
        RepositoryIndexEntry("add_sub", "2", ModelState.READY, "")
    ]
