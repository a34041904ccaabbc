"""Dynamic batching through the real daemon: concurrent tritonclient requests
to a model with dynamic_batching are executed together, each client gets its
own rows back, and the statistics say which batch sizes ran."""

from __future__ import annotations

import threading

import numpy as np
import tritonclient.http as httpclient

from model_fixtures import add_add_sub, add_sub_infer_inputs


def test_concurrent_requests_are_batched_and_split_back(tmp_path, start_daemon):
    batching = "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
    add_add_sub(tmp_path, "batched", config_extra=batching)
    daemon = start_daemon(tmp_path)
    errors: list[Exception] = []

    def client_loop(offset: int) -> None:
        with httpclient.InferenceServerClient(daemon.url) as client:
            for n in range(20):
                a = np.full((1, 16), offset * 100 + n, dtype=np.float32)
                inputs = add_sub_infer_inputs(httpclient, a, np.ones_like(a))
                try:
                    result = client.infer("batched", inputs)
                    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + 1)
                except Exception as exc:
                    errors.append(exc)

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    with httpclient.InferenceServerClient(daemon.url) as client:
        stats = client.get_inference_statistics("batched")["model_stats"][0]
    assert stats["inference_count"] == 80
    assert stats["execution_count"] < 80
    assert max(b["batch_size"] for b in stats["batch_stats"]) > 1
