"""The next desired state changes one model and nothing else, with a
generation above the current one, and keeps the way back (``previous``)
right through redeploys and halted deploys."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from edgebox.errors import EdgeboxError
from edgebox.fleet.document import Artifact, Desired, Targets, WantedModel, document_bytes
from edgebox.fleet.operator.next_document import (
    deploy_model,
    document_with,
    next_generation,
    read_current,
    rollback_model,
)
from edgebox.fleet.signing import sign_envelope
from fleet_documents import desired

V6 = Artifact("https://store/m-6.tar.gz", "6" * 64, 6)
V7 = Artifact("https://store/m-7.tar.gz", "7" * 64, 7)
V8 = Artifact("https://store/m-8.tar.gz", "8" * 64, 8)


def group_with(entry: WantedModel, generation: int = 40) -> Desired:
    return Desired("line-3", generation, "", {entry.name: entry})


def test_the_generation_grows_past_the_current_one_and_the_clock():
    assert next_generation(desired(generation=5), clock=lambda: 100.9) == 100
    assert next_generation(desired(generation=500), clock=lambda: 100.0) == 501
    assert next_generation(None, clock=lambda: 0.0) == 1


def test_a_new_version_points_back_at_the_one_the_group_ran():
    current = group_with(WantedModel("m", 7, V7, Targets(all=True), None, (6, V6)))
    assert deploy_model(current, "line-3", "m", 8, V8, None).previous == (7, V7)


@pytest.mark.parametrize(
    "entry",
    [
        WantedModel("m", 8, V8, Targets(all=True), None, (6, V6)),
        WantedModel("m", 7, V7, Targets(devices=("orin-a",)), None, (6, V6)),
    ],
    ids=["redeploy", "halted-deploy"],
)
def test_previous_survives_a_redeploy_and_a_halted_deploy(entry):
    assert deploy_model(group_with(entry), "line-3", "m", 8, V8, None).previous == (6, V6)


def test_rollback_goes_to_previous_and_can_itself_be_undone():
    current = group_with(WantedModel("m", 7, V7, Targets(devices=("orin-a",)), None, (6, V6)))
    back = rollback_model(current, "m", {"policy": "immediate"})
    assert (back.version, back.artifact, back.previous) == (6, V6, (7, V7))


def test_rollback_of_a_model_the_group_does_not_run_is_refused():
    with pytest.raises(EdgeboxError, match="model 'm': the group's desired state does not name it"):
        rollback_model(desired(), "m", None)


def test_the_next_document_leaves_the_other_models_as_they_were():
    current = desired(generation=3)
    entry = WantedModel("m", 8, V8)
    document = document_with(current, "line-3", entry, Targets(devices=("orin-a",)), 4)
    assert document.models["add_sub"] == current.models["add_sub"]
    assert document.models["m"].targets == Targets(devices=("orin-a",))


def test_a_current_document_under_our_key_that_does_not_verify_is_not_built_upon():
    key = Ed25519PrivateKey.generate()
    envelope = sign_envelope(document_bytes(desired()), key)
    tampered = envelope.replace(b'"signature":"', b'"signature":"AAAA', 1)
    with pytest.raises(EdgeboxError, match="signature does not verify"):
        read_current(tampered, "line-3", key)


def test_a_current_document_of_another_group_is_not_built_upon():
    key = Ed25519PrivateKey.generate()
    with pytest.raises(EdgeboxError, match="names group 'line-3'"):
        read_current(sign_envelope(document_bytes(desired()), key), "line-4", key)
