"""The gRPC transport renders the dataplane's typed results as the
``service_pb2`` messages Triton sends, field for field."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2
from tritonclient.grpc import service_pb2 as pb

from edgebox.dataplane_results import (
    InferBatchStatistics,
    InferStatistics,
    ModelMetadata,
    RepositoryIndexEntry,
    ServerMetadata,
    StatisticDuration,
    StatisticsSnapshot,
    TensorMetadata,
    VersionStatistics,
)
from edgebox.lifecycle.states import ModelState
from edgebox.protocol.grpc import render


def test_server_metadata():
    message = render.server_metadata(ServerMetadata("edgebox", "1.2.3", ("statistics",)))
    assert message == pb.ServerMetadataResponse(
        name="edgebox", version="1.2.3", extensions=["statistics"]
    )


def test_model_metadata_leaves_the_notes_out():
    result = ModelMetadata(
        name="lane",
        versions=("1", "3"),
        platform="tensorrt_plan",
        inputs=(TensorMetadata("images", "FP32", (-1, 3, 360, 640)),),
        outputs=(TensorMetadata("lanes", "FP16", (-1, 2784, 77)),),
        notes=("12 layers on DLA 0",),
    )
    message = render.model_metadata(result)
    assert message == pb.ModelMetadataResponse(
        name="lane",
        versions=["1", "3"],
        platform="tensorrt_plan",
        inputs=[
            pb.ModelMetadataResponse.TensorMetadata(
                name="images", datatype="FP32", shape=[-1, 3, 360, 640]
            )
        ],
        outputs=[
            pb.ModelMetadataResponse.TensorMetadata(
                name="lanes", datatype="FP16", shape=[-1, 2784, 77]
            )
        ],
    )


def test_model_config_is_sent_as_is():
    config = model_config_pb2.ModelConfig(name="m", max_batch_size=4)
    assert render.model_config(config).config == config


def test_statistics_fill_every_field_triton_fills():
    one = StatisticDuration(2, 2000)
    snapshot = StatisticsSnapshot(
        last_inference_ms=1700000000000,
        inference_count=5,
        execution_count=3,
        inference_stats=InferStatistics(
            success=StatisticDuration(5, 900),
            fail=StatisticDuration(1, 10),
            queue=StatisticDuration(5, 50),
            compute_input=StatisticDuration(5, 60),
            compute_infer=StatisticDuration(5, 700),
            compute_output=StatisticDuration(5, 70),
            cache_hit=StatisticDuration(),
            cache_miss=StatisticDuration(),
        ),
        batch_stats=(InferBatchStatistics(2, one, one, one),),
    )
    message = render.statistics([VersionStatistics("m", "1", snapshot)])
    stats = message.model_stats[0]
    assert (stats.name, stats.version, stats.last_inference) == ("m", "1", 1700000000000)
    assert (stats.inference_count, stats.execution_count) == (5, 3)
    assert (stats.inference_stats.success.count, stats.inference_stats.success.ns) == (5, 900)
    assert stats.inference_stats.fail.count == 1
    assert stats.inference_stats.compute_infer.ns == 700
    assert stats.batch_stats[0].batch_size == 2
    assert stats.batch_stats[0].compute_output == pb.StatisticDuration(count=2, ns=2000)


def test_repository_index_rows():
    message = render.repository_index(
        [
            RepositoryIndexEntry("a", "1", ModelState.READY, ""),
            RepositoryIndexEntry("b", None, ModelState.UNAVAILABLE, "config.pbtxt:3:1: bad"),
            RepositoryIndexEntry("c"),
        ]
    )
    assert [(m.name, m.version, m.state, m.reason) for m in message.models] == [
        ("a", "1", "READY", ""),
        ("b", "", "UNAVAILABLE", "config.pbtxt:3:1: bad"),
        ("c", "", "", ""),
    ]
