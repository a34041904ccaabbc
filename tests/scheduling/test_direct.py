"""The direct scheduler: one request, one ``execute``, on the caller's thread.
A model that raises anything at all fails only its request, and a request
whose client gave up while it waited for an instance is not run."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from google.protobuf import text_format

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.repository.config import ModelConfig
from edgebox.scheduling.direct import DirectScheduler
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, Tensor
from fakes.gated_instance import FakeGatedInstance

CONFIG = """
name: "m"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def scheduler_for(instance) -> DirectScheduler:
    config = text_format.Parse(CONFIG, ModelConfig())
    return DirectScheduler(
        InstancePool([instance]), ModelSignature.from_config(config), "model 'm' version 1"
    )


def request(value: float) -> InferRequest:
    return InferRequest("m", [Tensor("X", "FP32", np.full(3, value, np.float32))], id=str(value))


class FakeRaisingInstance(FakeGatedInstance):
    """Raises ``raised`` from execute for X < 0."""

    def __init__(self, raised: type[BaseException]) -> None:
        super().__init__()
        self.raised = raised

    def execute(self, requests):
        if requests[0].input("X").data[0] < 0:
            raise self.raised("raised by the backend")
        return super().execute(requests)


@pytest.mark.parametrize(
    "raised", [KeyboardInterrupt, SystemExit, asyncio.CancelledError, GeneratorExit]
)
def test_a_base_exception_from_execute_fails_only_its_request(raised) -> None:
    scheduler = scheduler_for(FakeRaisingInstance(raised))
    with pytest.raises(EdgeboxError) as failed:
        scheduler.infer(request(-1))
    assert failed.value.code is ErrorCode.INTERNAL
    assert str(failed.value) == (
        f"model 'm' version 1: backend failed: {raised.__name__}: raised by the backend"
    )
    response = scheduler.infer(request(2))
    np.testing.assert_array_equal(response.outputs[0].data, [4, 4, 4])
    stats = scheduler.statistics.snapshot().inference_stats
    assert (stats.fail.count, stats.success.count) == (1, 1)


def test_a_request_cancelled_while_waiting_for_the_instance_is_not_run() -> None:
    instance = FakeGatedInstance(hold_first=True)
    scheduler = scheduler_for(instance)
    first = threading.Thread(target=scheduler.infer, args=(request(1),))
    first.start()
    assert instance.entered.wait(5)
    gone = threading.Event()
    queued = request(2)
    queued.is_cancelled = gone.is_set
    outcome: list[BaseException] = []

    def wait_for_instance() -> None:
        try:
            scheduler.infer(queued)
        except EdgeboxError as exc:
            outcome.append(exc)

    second = threading.Thread(target=wait_for_instance)
    second.start()
    gone.set()
    instance.release.set()
    first.join(5)
    second.join(5)
    (error,) = outcome
    assert error.code is ErrorCode.CANCELLED
    assert str(error) == (
        "model 'm' version 1: request cancelled: its client gave up while it waited; not run"
    )
    assert [len(batch) for batch in instance.batches] == [1]
    stats = scheduler.statistics.snapshot().inference_stats
    assert (stats.fail.count, stats.success.count) == (1, 1)
