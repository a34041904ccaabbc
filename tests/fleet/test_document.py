"""A desired-state document is read field by field as hostile input: a
valid one round-trips through its canonical bytes, and each kind of mistake
is refused with the path of the field."""

from __future__ import annotations

import json

import pytest

from edgebox.fleet.document import (
    Targets,
    desired_topic,
    document_bytes,
    parse_document,
    reported_topic,
)
from edgebox.fleet.signing import Refused
from fleet_documents import desired


def test_a_document_round_trips_through_its_canonical_bytes() -> None:
    original = desired(
        7, targets=Targets(devices=("orin-1",), percent=10), rollout={"policy": "shadow"}
    )
    assert parse_document(document_bytes(original)) == original


def test_canonical_bytes_do_not_depend_on_the_order_models_were_given() -> None:
    one = desired()
    data = json.loads(document_bytes(one))
    data["models"] = dict(reversed(list(data["models"].items())))
    assert document_bytes(parse_document(json.dumps(data).encode())) == document_bytes(one)


def mutated(change) -> bytes:
    data = json.loads(document_bytes(desired()))
    change(data)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda d: d.update(schema="edgebox.fleet.desired/2"), "document.schema"),
        (lambda d: d.update(generation=0), r"document.generation: 0 is outside"),
        (lambda d: d.update(generation="3"), "document.generation: expected an integer"),
        (lambda d: d.update(generation=True), "document.generation: expected an integer"),
        (lambda d: d.update(group="a/b"), "not a group name"),
        (lambda d: d.update(surprise=1), "unknown field"),
        (lambda d: d["models"].update({"..": d["models"]["add_sub"]}), "not a model name"),
        (lambda d: d["models"]["add_sub"].update(version=-1), "add_sub.version"),
        (
            lambda d: d["models"]["add_sub"]["artifact"].update(url="file:///etc/passwd"),
            "only http",
        ),
        (lambda d: d["models"]["add_sub"]["artifact"].update(sha256="ABC"), "64 lowercase hex"),
        (lambda d: d["models"]["add_sub"]["artifact"].update(size=0), "artifact.size"),
        (lambda d: d["models"]["add_sub"].update(targets={}), "name all, devices or percent"),
        (lambda d: d["models"]["add_sub"].update(targets={"percent": 101}), "percent: 101"),
        (lambda d: d["models"]["add_sub"].update(targets={"all": False}), "must be true"),
        (lambda d: d["models"]["add_sub"].update(targets={"devices": "orin"}), "a list"),
        (lambda d: d["models"]["add_sub"].update(rollout=[]), "rollout: expected an object"),
    ],
)
def test_each_mistake_is_refused_with_the_path_of_its_field(change, why: str) -> None:
    with pytest.raises(Refused, match=why):
        parse_document(mutated(change))


def test_bytes_that_are_no_json_or_too_many_are_refused() -> None:
    with pytest.raises(Refused, match="not JSON"):
        parse_document(b"\xff\xfe")
    with pytest.raises(Refused, match="exceeds"):
        parse_document(b" " * (256 * 1024 + 1))


def test_topics_name_the_group_and_the_device_as_one_level_each() -> None:
    assert desired_topic("edgebox", "line-3") == "edgebox/fleet/line-3/desired"
    assert reported_topic("edgebox", "orin/7") == "edgebox/orin_7/fleet"
