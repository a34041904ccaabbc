"""Unloading a model that loaded ensembles use takes them down too (as in
Triton): the dashboard's unload names them and waits for ``confirm``, and the
models view lists them in ``used_by`` (edgebox/dashboard/api.py)."""

from __future__ import annotations

import logging

from dashboard_client import log_in, post

from model_fixtures import add_add_sub, add_sub_tensors, ensemble_config, write_model

BOTH = {"INPUT0": "INPUT0", "INPUT1": "INPUT1"}
OUTPUTS = {"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"}


def add_pair(repository, name: str) -> None:
    """An ensemble of add_sub alone, under ``name``."""
    config = ensemble_config(name, *add_sub_tensors(), [("add_sub", BOTH, OUTPUTS)], 8)
    write_model(repository, name, config, {"1/.keep": ""})


def test_unload_of_a_model_ensembles_use_answers_409_naming_them(tmp_path, stack, make_app):
    add_add_sub(tmp_path)
    add_pair(tmp_path, "pair")
    add_pair(tmp_path, "unloaded_pair")
    stack.manager.load_model("pair")
    client = make_app().test_client()
    log_in(client)

    models = {m["name"]: m for m in client.get("/api/v1/models").get_json()["models"]}
    assert models["add_sub"]["used_by"] == ["pair"]
    assert models["pair"]["used_by"] == []

    for body in (None, {}, {"confirm": False}):
        reply = post(client, "/api/v1/models/add_sub/unload", json=body)
        assert reply.status_code == 409, body
        assert reply.get_json() == {
            "error": "unload 'add_sub': loaded ensembles use it and would be unloaded too: "
            """'pair'; send {"confirm": true} to unload them all""",
            "used_by": ["pair"],
        }
    assert stack.registry.is_ready("add_sub") and stack.registry.is_ready("pair")

    done = post(client, "/api/v1/models/add_sub/unload", json={"confirm": True})
    assert (done.status_code, done.get_json()["state"]) == (200, "ok")
    assert not stack.registry.is_ready("add_sub")
    assert not stack.registry.is_ready("pair")


def test_unload_confirm_must_be_a_boolean(tmp_path, stack, make_app):
    add_add_sub(tmp_path)
    stack.manager.load_model("add_sub")
    client = make_app().test_client()
    log_in(client)
    reply = post(client, "/api/v1/models/add_sub/unload", json={"confirm": "yes"})
    assert reply.status_code == 400
    assert reply.get_json() == {
        "error": "unload 'add_sub': 'confirm' must be true or false, got 'yes'"
    }
    assert stack.registry.is_ready("add_sub")


def test_unload_of_a_model_no_loaded_ensemble_uses_needs_no_confirm(tmp_path, stack, make_app):
    add_add_sub(tmp_path)
    add_pair(tmp_path, "pair")
    stack.manager.load_model("add_sub")
    client = make_app().test_client()
    log_in(client)
    assert client.get("/api/v1/models").get_json()["models"][0]["used_by"] == []
    reply = post(client, "/api/v1/models/add_sub/unload")
    assert reply.status_code == 200
    assert not stack.registry.is_ready("add_sub")


def test_an_unconfirmed_unload_is_audited_with_the_ensembles(tmp_path, stack, make_app, caplog):
    add_add_sub(tmp_path)
    add_pair(tmp_path, "pair")
    stack.manager.load_model("pair")
    client = make_app().test_client()
    log_in(client)
    with caplog.at_level(logging.INFO, logger="edgebox.dashboard.audit"):
        post(client, "/api/v1/models/add_sub/unload")
    assert (
        "Dashboard: unload user=admin from=127.0.0.1 model=add_sub result=not-confirmed "
        "used_by=pair"
    ) in caplog.messages
