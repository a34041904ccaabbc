"""The verbs of the inference protocol, protocol-neutral: HTTP, gRPC, streams
and the dashboard all call these and nothing below them. Inference, metadata,
statistics and the server's own state live here; repository control (load,
unload, index, rollback) lives beside it in ``repository_control``.

Answers are typed (``dataplane_results``); each transport renders them.

Requests are validated here against the model's config (names, datatypes,
shapes, batch size) before any backend sees them, so every transport reports a
bad request the same way.
Spec: https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/required_api.md
and Triton's extensions under https://github.com/triton-inference-server/server/tree/main/docs/protocol
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from edgebox import __version__
from edgebox.caching.cache_key import request_key
from edgebox.caching.response_cache import ResponseCache
from edgebox.dataplane_results import (
    ModelConfig,
    ModelMetadata,
    ServerMetadata,
    TensorMetadata,
    VersionStatistics,
)
from edgebox.errors import EdgeboxError, InvalidArgument, NotFound
from edgebox.lifecycle.registry import UNKNOWN_MODEL, ModelRegistry, ServedModel
from edgebox.log_settings import LogSettings
from edgebox.responses import Outcome, ResponseContractError, ResponseSink
from edgebox.tensors import InferRequest, InferResponse, Tensor
from edgebox.trace_settings import TraceSettings

ResultTap = Callable[[ServedModel, InferResponse], None]
"""Gets a client's answer from a model that publishes its results; called on
the request's thread, so it only hands the answer on."""

log = logging.getLogger(__name__)

EXTENSIONS = [
    "classification",
    "binary_tensor_data",
    "model_repository",
    "model_configuration",
    "statistics",
    "system_shared_memory",
    "logging",
    "trace",
]


class DataPlane:
    """Called from many threads at once (HTTP and gRPC workers, streams, the
    dashboard, ensemble steps); keeps no state per request: each one holds
    the version the registry handed it until its answer is in."""

    def __init__(
        self,
        registry: ModelRegistry,
        strict_readiness: bool = False,
        log_settings: LogSettings | None = None,
        result_tap: ResultTap | None = None,
        server_name: str = "edgebox",
        response_cache: ResponseCache | None = None,
    ) -> None:
        """``response_cache``: the daemon's cache (``cache_config``); None, no
        model's answers are cached, whatever its config says (as in Triton)."""
        self._registry = registry
        self._response_cache = response_cache
        self._server_name = server_name
        self._result_tap = result_tap
        self._log_settings = log_settings or LogSettings()
        self._trace_settings = TraceSettings()
        self._strict_readiness = strict_readiness
        self._started = threading.Event()
        self._stopping = threading.Event()

    # -- server state ------------------------------------------------------

    def mark_started(self) -> None:
        """Startup loading is done; from now on the server may report ready."""
        self._started.set()

    def mark_stopping(self) -> None:
        """Shutdown has begun: no longer live or ready, and a repository load
        that fails now passes its error through (``RepositoryControl``)."""
        self._stopping.set()

    def live(self) -> bool:
        return not self._stopping.is_set()

    def ready(self) -> bool:
        """Ready once startup loading finished; with strict readiness, only while
        every model it knows has a ready version."""
        if not self._started.is_set() or self._stopping.is_set():
            return False
        if self._strict_readiness:
            return all(self._registry.is_ready(name) for name in self._registry.model_names())
        return True

    def server_metadata(self) -> ServerMetadata:
        """``name`` is the ``server_name`` setting: "triton" for clients that
        check it (NVIDIA's examples do)."""
        return ServerMetadata(self._server_name, __version__, tuple(EXTENSIONS))

    # -- logging and trace extensions ----------------------------------------

    def log_settings(self) -> dict:
        """Triton's ``logging`` extension: the daemon's current log settings."""
        return self._log_settings.current()

    def update_log_settings(self, changes: dict) -> dict:
        """Applies ``changes`` to the daemon's logging now (see ``log_settings``)."""
        return self._log_settings.update(changes)

    def trace_settings(self, model: str = "") -> dict:
        """Triton's ``trace`` extension: tracing is off and stays off
        (``trace_settings``); NotFound for a model the registry does not know."""
        if model:
            self._check_known(model)
        return self._trace_settings.current(model)

    def update_trace_settings(self, model: str, changes: dict) -> dict:
        if model:
            self._check_known(model)
        return self._trace_settings.update(model, changes)

    def _check_known(self, model: str) -> None:
        if model not in self._registry.model_names():
            raise NotFound(f"{UNKNOWN_MODEL}: '{model}' is not found")

    # -- models ------------------------------------------------------------

    def model_ready(self, name: str, version: str = "") -> bool:
        """False for an unknown model or version as for one not ready: Triton
        tells them apart in no transport."""
        return self._registry.is_ready(name, version)

    def model_metadata(self, name: str, version: str = "") -> ModelMetadata:
        served = self._registry.get(name, version)
        config = served.config
        versions = sorted(self._registry.served_versions(name))
        return ModelMetadata(
            name=name,
            versions=tuple(str(v) for v in versions),
            platform=config.platform or config.backend,
            inputs=tuple(_tensor_metadata(s) for s in served.signature.inputs.values()),
            outputs=tuple(_tensor_metadata(s) for s in served.signature.outputs.values()),
            notes=tuple(served.notes),
        )

    def model_config(self, name: str, version: str = "") -> ModelConfig:
        """A copy of the served config, so no transport can change what the
        version runs with."""
        config = ModelConfig()
        config.CopyFrom(self._registry.get(name, version).config)
        return config

    def check_servable(self, name: str, version: str = "") -> None:
        """Raise what ``infer`` would for a model or version that cannot take a
        request (NotFound, Unavailable with its reason), so a transport can say
        so before it reads a body. ``infer`` still decides: a version may leave
        in between."""
        self._registry.get(name, version)

    def infer(self, request: InferRequest, from_client: bool = False) -> InferResponse:
        """Unary inference, the response sink's special case: the request's one
        final response, or its error raised (``Scheduler.infer``). The
        caller's thread waits here, for a batcher's worker when the model
        batches, and holds the model version until the answer is in.

        ``from_client``: an HTTP or gRPC client asked (not a stream, an
        ensemble step or a BLS call), so a model whose config opts in has its
        answer handed to the result tap (MQTT), which must not block."""
        served = self._registry.acquire(request.model_name, request.model_version)
        try:
            # A request the model never saw is not the model's failure: Triton
            # counts neither success nor failure for it (tests/parity/).
            served.signature.check_request(request, served.where)
            if self._caches(served):
                response = self._cached(served, request)
            elif served.observer is not None:
                response = _observed(served, request)
            else:
                response = served.scheduler.infer(request)
            response = _stamped(response, request, served)
            if from_client and self._result_tap is not None and _publishes(served):
                self._result_tap(served, response)
            return response
        finally:
            served.exit()

    def _caches(self, served: ServedModel) -> bool:
        """Whether ``served``'s answers go through the response cache. Not
        while a rollout observes the version, so the rollout judges the
        model's own runs; nor for decoupled and sequence models, whose configs
        are refused with ``response_cache`` anyway."""
        return (
            self._response_cache is not None
            and served.observer is None
            and not served.scheduler.decoupled
            and _cache_enabled(served)
        )

    def _cached(self, served: ServedModel, request: InferRequest) -> InferResponse:
        """The kept answer to an identical earlier request, or the model's
        answer, then kept unless it is an error. Counted as Triton counts
        them: a hit is a success with a ``cache_hit`` and nothing computed,
        a miss adds ``cache_miss`` (lookup and insertion) to the run's own
        figures."""
        key, hit, lookup_ns = self._look_up(served, request)
        if hit is not None:
            return hit
        statistics = served.scheduler.statistics
        try:
            response = served.scheduler.infer(request)
        except BaseException:
            statistics.record_cache_miss(lookup_ns)
            raise
        inserting = time.perf_counter_ns()
        self._response_cache.insert(key, response)
        statistics.record_cache_miss(lookup_ns + time.perf_counter_ns() - inserting)
        return response

    def _look_up(
        self, served: ServedModel, request: InferRequest
    ) -> tuple[bytes, InferResponse | None, int]:
        """``request``'s cache key, the kept answer (a hit, counted) or None,
        and the nanoseconds the lookup took."""
        start = time.perf_counter_ns()
        key = request_key(served.name, str(served.version), request, served.source)
        answer = self._response_cache.lookup(key)
        if answer is None:
            return key, None, time.perf_counter_ns() - start
        response = answer.response(request)
        spent = time.perf_counter_ns() - start
        served.scheduler.statistics.record_cache_hit(spent)
        return key, response, spent

    def infer_stream(self, request: InferRequest, sink: ResponseSink) -> None:
        """Streaming inference (gRPC ModelStreamInfer, HTTP generate_stream):
        the request's responses go to ``sink``, the last with ``final=True``
        (``edgebox/responses.py``); a model that is not decoupled sends
        exactly one, final.

        Never raises for the request's failure: an unknown model, an invalid
        request or a failed run arrives as the final error. Sends may come on
        this thread before ``infer_stream`` returns or from another one after
        (a batcher's worker), so ``sink`` must be ready before the call. The
        model version is held, and a reload drains it, until the final.
        """
        try:
            served = self._registry.acquire(request.model_name, request.model_version)
        except EdgeboxError as exc:
            sink.send(exc, True)
            return
        responses = _ServedResponses(sink, request, served)
        try:
            served.signature.check_request(request, served.where)
        except EdgeboxError as exc:
            responses.send(exc, True)
            return
        if self._caches(served):
            key, hit, lookup_ns = self._look_up(served, request)
            if hit is not None:
                responses.send(hit, True)
                return
            responses.keep_final(self._response_cache, key, lookup_ns)
        try:
            served.scheduler.submit(request, responses)
        except Exception as exc:
            if responses.finished:
                raise
            log.exception("%s: scheduling a streamed request failed", served.where)
            responses.send(
                EdgeboxError(f"{served.where}: request failed: {type(exc).__name__}: {exc}"), True
            )

    def abandon_held(self, reason: str) -> int:
        """Fail (UNAVAILABLE, ``reason``) every request a decoupled model still
        holds without its final, so a shutdown's drain ends; how many there were."""
        count = 0
        for name in self._registry.model_names():
            for served in self._registry.served_versions(name).values():
                if served.scheduler.decoupled:
                    count += served.scheduler.abandon(reason)
        return count

    def statistics(self, name: str = "", version: str = "") -> list[VersionStatistics]:
        """One entry per served version: of ``name`` (only ``version`` when
        given), or of every model when ``name`` is empty, by name then version.
        A named model with no version served, or a named version not served,
        is InvalidArgument with Triton's text."""
        if name:
            served = self._registry.served_versions(name)
            if not served:
                raise InvalidArgument(f"requested model '{name}' is not available")
            if version:
                try:
                    served_list = [self._registry.get(name, version)]
                except EdgeboxError:
                    raise InvalidArgument(
                        f"requested model version is not available for model '{name}'"
                    ) from None
            else:
                served_list = [served[v] for v in sorted(served)]
        else:
            served_list = [
                s
                for model in self._registry.model_names()
                for _, s in sorted(self._registry.served_versions(model).items())
            ]
        return [
            VersionStatistics(
                s.name,
                str(s.version),
                s.scheduler.statistics.snapshot(),
                _cache_enabled(s),
            )
            for s in served_list
        ]


class _ServedResponses:
    """The dataplane's sink in front of a streamed request's own: stamps each
    response with the version that ran it (and classifies), tells a rollout's
    observer the final outcome, releases that version at the final, and
    refuses a send after it (ResponseContractError). With ``keep_final``, a
    final answer is kept in the response cache before it is stamped."""

    __slots__ = (
        "_cache",
        "_key",
        "_lookup_ns",
        "_observer",
        "_request",
        "_served",
        "_sink",
        "_started",
        "finished",
    )

    def __init__(self, sink: ResponseSink, request: InferRequest, served: ServedModel) -> None:
        self._sink = sink
        self._request = request
        self._served = served
        self._observer = served.observer
        self._started = time.perf_counter() if self._observer is not None else 0.0
        self._cache: ResponseCache | None = None
        self._key = b""
        self._lookup_ns = 0
        self.finished = False

    def keep_final(self, cache: ResponseCache, key: bytes, lookup_ns: int) -> None:
        """The request missed ``cache`` (a lookup of ``lookup_ns``): keep its
        final answer under ``key``, and count the miss when it comes."""
        self._cache = cache
        self._key = key
        self._lookup_ns = lookup_ns

    def send(self, response: Outcome, final: bool) -> None:
        if self.finished:
            raise ResponseContractError(
                f"{self._served.where}: a response was sent after the final one"
            )
        if final and self._cache is not None:
            self._keep(response)
        if isinstance(response, InferResponse):
            try:
                response = _stamped(response, self._request, self._served)
            except EdgeboxError as exc:
                response = exc
            else:
                if self._served.scheduler.decoupled:
                    response.parameters["triton_final_response"] = final
        if not final:
            self._sink.send(response, False)
            return
        self.finished = True
        if self._observer is not None:
            answer = response if isinstance(response, InferResponse) else None
            error = response if isinstance(response, BaseException) else None
            seconds = time.perf_counter() - self._started
            _tell(self._observer, self._served, self._request, answer, seconds, error)
        try:
            self._sink.send(response, True)
        finally:
            self._served.exit()

    def _keep(self, response: Outcome) -> None:
        inserting = time.perf_counter_ns()
        if isinstance(response, InferResponse):
            self._cache.insert(self._key, response)
        spent = self._lookup_ns + time.perf_counter_ns() - inserting
        self._served.scheduler.statistics.record_cache_miss(spent)


def _observed(served: ServedModel, request: InferRequest) -> InferResponse:
    """``served`` answers ``request`` while a rollout watches it: its
    observer gets the answer or the error, and how long it took. An observer
    that fails never costs the client its answer."""
    observer = served.observer
    started = time.perf_counter()
    try:
        response = served.scheduler.infer(request)
    except BaseException as exc:
        _tell(observer, served, request, None, time.perf_counter() - started, exc)
        raise
    _tell(observer, served, request, response, time.perf_counter() - started, None)
    return response


def _tell(observer, served, request, response, seconds, error) -> None:
    if observer is None:
        return
    try:
        observer(request, response, seconds, error)
    except Exception:
        log.exception("%s: the rollout's observer failed", served.where)


def _stamped(response: InferResponse, request: InferRequest, served: ServedModel) -> InferResponse:
    """The response as the client sees it: named after the version that ran
    it, classified where the request asked (InvalidArgument if it cannot be)."""
    response.model_name = served.name
    response.model_version = str(served.version)
    if any("classification" in o.parameters for o in request.outputs):
        _classify(response, request, served)
    return response


def _tensor_metadata(spec) -> TensorMetadata:
    return TensorMetadata(spec.name, spec.datatype, tuple(spec.shape))


def _classify(response: InferResponse, request: InferRequest, served: ServedModel) -> None:
    """Triton's classification extension: the top k classes as
    ``"<value>:<index>[:<label>]"`` strings, per batch item.
    Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_classification.md
    """
    wanted = {o.name: o.parameters.get("classification") for o in request.outputs}
    outputs = []
    for tensor in response.outputs:
        count = wanted.get(tensor.name)
        if not count:
            outputs.append(tensor)
            continue
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InvalidArgument(
                f"{served.where}, output '{tensor.name}': classification must be a positive "
                f"integer, got {count!r}"
            )
        if tensor.datatype == "BYTES":
            raise InvalidArgument(
                f"{served.where}, output '{tensor.name}': classification needs a numeric output"
            )
        labels = served.labels.get(tensor.name, [])
        batched = served.signature.max_batch_size > 0
        rows = (
            tensor.data.reshape(tensor.data.shape[0], -1) if batched else tensor.data.reshape(1, -1)
        )
        k = min(count, rows.shape[1])
        result = np.empty((rows.shape[0], k), dtype=object)
        for row_index, row in enumerate(rows):
            top = np.argsort(-row.astype(np.float64), kind="stable")[:k]
            for column, index in enumerate(top):
                text = f"{float(row[index]):f}:{int(index)}"
                if int(index) < len(labels):
                    text += f":{labels[int(index)]}"
                result[row_index, column] = text.encode("utf-8")
        outputs.append(Tensor(tensor.name, "BYTES", result if batched else result[0]))
    response.outputs = outputs


def _cache_enabled(served: ServedModel) -> bool:
    config = served.config
    return config is not None and config.response_cache.enable


def _publishes(served: ServedModel) -> bool:
    publishing = getattr(served, "publishing", None)
    return publishing is not None and publishing.publish
