"""The config answer of a sequence model holds what Triton 2.51 fills in
(probed against its python backend): ``max_sequence_idle_microseconds``
1000000 when unset, and an ``oldest`` strategy's empty
``preferred_batch_size`` as ``[max_batch_size]`` when the model batches."""

from __future__ import annotations

import textwrap
from pathlib import Path

from edgebox.repository.config import config_to_dict, read_model_config

CONTROLS = """
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
"""


def sequence_answer(tmp_path: Path, max_batch_size: int, batching: str) -> dict:
    model_dir = tmp_path / "seq"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text("")
    (model_dir / "config.pbtxt").write_text(
        textwrap.dedent(
            f"""
            name: "seq"
            backend: "python"
            max_batch_size: {max_batch_size}
            sequence_batching {{ {batching} {CONTROLS} }}
            input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
            output [ {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
            """
        )
    )
    answer = config_to_dict(read_model_config(model_dir))["sequence_batching"]
    answer.pop("control_input")
    return answer


def test_an_unset_idle_time_is_answered_as_tritons_one_second(tmp_path: Path) -> None:
    answer = sequence_answer(tmp_path, 8, "")
    assert answer == {
        "max_sequence_idle_microseconds": 1000000,
        "state": [],
        "iterative_sequence": False,
    }


def test_a_given_idle_time_is_kept(tmp_path: Path) -> None:
    answer = sequence_answer(tmp_path, 8, "max_sequence_idle_microseconds: 5000000 direct { }")
    assert answer["max_sequence_idle_microseconds"] == 5000000


def test_oldest_without_preferred_sizes_prefers_max_batch_size(tmp_path: Path) -> None:
    answer = sequence_answer(tmp_path, 8, "oldest { max_candidate_sequences: 3 }")
    assert answer["oldest"] == {
        "max_candidate_sequences": 3,
        "preferred_batch_size": [8],
        "max_queue_delay_microseconds": 0,
        "preserve_ordering": False,
    }


def test_oldest_keeps_its_preferred_sizes_and_none_without_batching(tmp_path: Path) -> None:
    given = sequence_answer(tmp_path / "a", 8, "oldest { preferred_batch_size: [ 2, 4 ] }")
    unbatched = sequence_answer(tmp_path / "b", 0, "oldest { max_candidate_sequences: 2 }")
    assert given["oldest"]["preferred_batch_size"] == [2, 4]
    assert unbatched["oldest"]["preferred_batch_size"] == []
