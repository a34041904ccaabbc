"""The dataplane's typed results as ``service_pb2`` response messages, field
for field what Triton's gRPC frontend sends; nothing here reads a request.
Spec: https://github.com/triton-inference-server/common/blob/main/protobuf/grpc_service.proto
"""

from __future__ import annotations

from collections.abc import Iterable

from tritonclient.grpc import service_pb2 as pb

from edgebox import dataplane_results as results


def server_metadata(result: results.ServerMetadata) -> pb.ServerMetadataResponse:
    return pb.ServerMetadataResponse(
        name=result.name, version=result.version, extensions=list(result.extensions)
    )


def model_metadata(result: results.ModelMetadata) -> pb.ModelMetadataResponse:
    """KServe v2's fields; the load ``notes`` have no field in the message."""
    return pb.ModelMetadataResponse(
        name=result.name,
        versions=list(result.versions),
        platform=result.platform,
        inputs=[_tensor(t) for t in result.inputs],
        outputs=[_tensor(t) for t in result.outputs],
    )


def model_config(config: results.ModelConfig) -> pb.ModelConfigResponse:
    return pb.ModelConfigResponse(config=config)


def statistics(entries: Iterable[results.VersionStatistics]) -> pb.ModelStatisticsResponse:
    return pb.ModelStatisticsResponse(model_stats=[_version_statistics(e) for e in entries])


def repository_index(entries: Iterable[results.RepositoryIndexEntry]) -> pb.RepositoryIndexResponse:
    """A never-loaded folder is its name alone; a model-level status has an
    empty ``version``."""
    return pb.RepositoryIndexResponse(
        models=[
            pb.RepositoryIndexResponse.ModelIndex(
                name=entry.name,
                version=entry.version or "",
                state=entry.state.value if entry.state is not None else "",
                reason=entry.reason,
            )
            for entry in entries
        ]
    )


def _tensor(tensor: results.TensorMetadata) -> pb.ModelMetadataResponse.TensorMetadata:
    return pb.ModelMetadataResponse.TensorMetadata(
        name=tensor.name, datatype=tensor.datatype, shape=list(tensor.shape)
    )


def _version_statistics(entry: results.VersionStatistics) -> pb.ModelStatistics:
    counts = entry.counts
    phases = counts.inference_stats
    return pb.ModelStatistics(
        name=entry.name,
        version=entry.version,
        last_inference=counts.last_inference_ms,
        inference_count=counts.inference_count,
        execution_count=counts.execution_count,
        inference_stats=pb.InferStatistics(
            success=_duration(phases.success),
            fail=_duration(phases.fail),
            queue=_duration(phases.queue),
            compute_input=_duration(phases.compute_input),
            compute_infer=_duration(phases.compute_infer),
            compute_output=_duration(phases.compute_output),
            cache_hit=_duration(phases.cache_hit),
            cache_miss=_duration(phases.cache_miss),
        ),
        batch_stats=[_batch(b) for b in counts.batch_stats],
    )


def _batch(batch: results.InferBatchStatistics) -> pb.InferBatchStatistics:
    return pb.InferBatchStatistics(
        batch_size=batch.batch_size,
        compute_input=_duration(batch.compute_input),
        compute_infer=_duration(batch.compute_infer),
        compute_output=_duration(batch.compute_output),
    )


def _duration(duration: results.StatisticDuration) -> pb.StatisticDuration:
    return pb.StatisticDuration(count=duration.count, ns=duration.ns)
