"""The HTTP transport renders the dataplane's typed results as the exact JSON
Triton's clients read: keys, their order and every value are pinned here."""

from __future__ import annotations

import json

from edgebox.dataplane_results import (
    InferBatchStatistics,
    InferStatistics,
    ModelConfig,
    ModelMetadata,
    RepositoryIndexEntry,
    ServerMetadata,
    StatisticDuration,
    StatisticsSnapshot,
    TensorMetadata,
    VersionStatistics,
)
from edgebox.lifecycle.states import ModelState
from edgebox.protocol.http import render


def _text(document) -> str:
    return json.dumps(document)


def test_server_metadata_is_name_version_extensions():
    result = ServerMetadata("edgebox", "1.2.3", ("classification", "statistics"))
    assert _text(render.server_metadata(result)) == (
        '{"name": "edgebox", "version": "1.2.3", "extensions": ["classification", "statistics"]}'
    )


def _metadata(notes: tuple[str, ...] = ()) -> ModelMetadata:
    return ModelMetadata(
        name="lane",
        versions=("1", "3"),
        platform="tensorrt_plan",
        inputs=(TensorMetadata("images", "FP32", (-1, 3, 360, 640)),),
        outputs=(TensorMetadata("lanes", "FP16", (-1, 77)), TensorMetadata("n", "INT32", ())),
        notes=notes,
    )


def test_model_metadata_is_kserve_v2_without_notes_when_there_are_none():
    assert _text(render.model_metadata(_metadata())) == (
        '{"name": "lane", "versions": ["1", "3"], "platform": "tensorrt_plan", '
        '"inputs": [{"name": "images", "datatype": "FP32", "shape": [-1, 3, 360, 640]}], '
        '"outputs": [{"name": "lanes", "datatype": "FP16", "shape": [-1, 77]}, '
        '{"name": "n", "datatype": "INT32", "shape": []}]}'
    )


def test_model_metadata_notes_come_last():
    document = render.model_metadata(_metadata(("layer placement: GPU only",)))
    assert list(document) == ["name", "versions", "platform", "inputs", "outputs", "notes"]
    assert document["notes"] == ["layer placement: GPU only"]


def test_model_config_is_the_configuration_extension_json():
    config = ModelConfig(name="m", max_batch_size=4)
    config.input.add(name="X", data_type="TYPE_INT64", dims=[2**40])
    document = render.model_config(config)
    assert (document["name"], document["max_batch_size"]) == ("m", 4)
    assert document["input"][0]["dims"] == [2**40]


def _duration(n: int) -> StatisticDuration:
    return StatisticDuration(n, n * 1000)


def test_statistics_are_tritons_model_stats_document():
    snapshot = StatisticsSnapshot(
        last_inference_ms=1700000000123,
        inference_count=5,
        execution_count=2,
        inference_stats=InferStatistics(
            success=_duration(2),
            fail=_duration(1),
            queue=_duration(2),
            compute_input=_duration(3),
            compute_infer=_duration(4),
            compute_output=_duration(5),
            cache_hit=_duration(0),
            cache_miss=_duration(0),
        ),
        batch_stats=(InferBatchStatistics(4, _duration(1), _duration(6), _duration(7)),),
    )
    assert _text(render.statistics([VersionStatistics("m", "2", snapshot)])) == (
        '{"model_stats": [{"name": "m", "version": "2", "last_inference": 1700000000123, '
        '"inference_count": 5, "execution_count": 2, "inference_stats": {'
        '"success": {"count": 2, "ns": 2000}, "fail": {"count": 1, "ns": 1000}, '
        '"queue": {"count": 2, "ns": 2000}, "compute_input": {"count": 3, "ns": 3000}, '
        '"compute_infer": {"count": 4, "ns": 4000}, "compute_output": {"count": 5, "ns": 5000}, '
        '"cache_hit": {"count": 0, "ns": 0}, "cache_miss": {"count": 0, "ns": 0}}, '
        '"response_stats": {}, '
        '"batch_stats": [{"batch_size": 4, "compute_input": {"count": 1, "ns": 1000}, '
        '"compute_infer": {"count": 6, "ns": 6000}, "compute_output": {"count": 7, "ns": 7000}}], '
        '"memory_usage": []}]}'
    )
    assert render.statistics([]) == {"model_stats": []}


def test_repository_index_entries_name_only_what_is_known():
    entries = [
        RepositoryIndexEntry("a", "1", ModelState.READY, ""),
        RepositoryIndexEntry("b", None, ModelState.UNAVAILABLE, "config.pbtxt:1:1: bad"),
        RepositoryIndexEntry("c"),
    ]
    assert _text(render.repository_index(entries)) == (
        '[{"name": "a", "version": "1", "state": "READY", "reason": ""}, '
        '{"name": "b", "state": "UNAVAILABLE", "reason": "config.pbtxt:1:1: bad"}, '
        '{"name": "c"}]'
    )
