"""The model-name rule at its one home: every clause, in the repository's
words (load and unload requests, the scanner, ensemble steps) and in the
command line's (``edgebox publish``, ``edgebox build-engine --model``), which
also refuses a name the scanner would pass over."""

from __future__ import annotations

import pytest

from edgebox.errors import InvalidArgument
from edgebox.repository.names import (
    NAME_MAX,
    check_model_name,
    check_new_model_name,
    is_ignored,
    model_name_problem,
    new_model_name_problem,
)

SINGLE_FOLDER = "expected a single folder name (not '.' or '..', without '/' or NUL)"
IGNORED = "names starting with '.' or ending with .tmp or .partial are ignored by the repository"


def too_long(name: str) -> str:
    return f"model name '{name[:32]}...': longer than 255 bytes, the longest folder name"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("", ""),
        (".", "."),
        ("..", ".."),
        ("a/b", "a/b"),
        ("/etc", "/etc"),
        ("a\0b", "a\\0b"),
    ],
    ids=["empty", "dot", "dot-dot", "slash", "absolute", "NUL"],
)
def test_a_name_that_is_not_one_folder_name_is_refused(name: str, shown: str) -> None:
    assert model_name_problem(name) == f"model name '{shown}': {SINGLE_FOLDER}"
    with pytest.raises(InvalidArgument):
        check_model_name(name)


@pytest.mark.parametrize(
    "name",
    ["x" * (NAME_MAX + 1), "é" * 128, "\u6a21" * 86],
    ids=["256 ASCII", "256 bytes of 2-byte letters", "258 bytes of 3-byte letters"],
)
def test_a_name_over_255_bytes_in_utf8_is_refused(name: str) -> None:
    assert len(name.encode()) > NAME_MAX
    assert model_name_problem(name) == too_long(name)
    assert new_model_name_problem(name) == too_long(name)
    assert new_model_name_problem(name, "--model") == f"--model: {too_long(name)}"


@pytest.mark.parametrize("name", ["x" * NAME_MAX, "é" * 127 + "x", "\u6a21" * 85])
def test_a_name_of_up_to_255_bytes_passes(name: str) -> None:
    assert len(name.encode()) <= NAME_MAX
    assert model_name_problem(name) is None
    assert new_model_name_problem(name) is None


@pytest.mark.parametrize("name", ["add_sub", "model.v2", "..hidden_but_valid", "a-b", "ünï"])
def test_ordinary_names_pass_both_rules(name: str) -> None:
    assert model_name_problem(name) is None
    if not is_ignored(name):
        assert new_model_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "message", "flagged"),
    [
        ("", "model name is empty", "--model: model name is empty"),
        (
            "a/b",
            "model name 'a/b': must not contain '/'",
            "--model 'a/b': a model name must not contain '/'",
        ),
        (
            "a\0b",
            "model name 'a\0b': must not contain '/'",
            "--model 'a\0b': a model name must not contain '/'",
        ),
        (".", f"model name '.': {IGNORED}", f"--model '.': {IGNORED}"),
        ("..", f"model name '..': {IGNORED}", f"--model '..': {IGNORED}"),
        (".hidden", f"model name '.hidden': {IGNORED}", f"--model '.hidden': {IGNORED}"),
        ("m.tmp", f"model name 'm.tmp': {IGNORED}", f"--model 'm.tmp': {IGNORED}"),
        ("m.partial", f"model name 'm.partial': {IGNORED}", f"--model 'm.partial': {IGNORED}"),
    ],
)
def test_a_command_refuses_what_the_repository_would_not_hold_or_see(
    name: str, message: str, flagged: str
) -> None:
    assert new_model_name_problem(name) == message
    assert new_model_name_problem(name, "--model") == flagged
    with pytest.raises(InvalidArgument) as info:
        check_new_model_name(name, "--model")
    assert str(info.value) == flagged


def test_a_hidden_name_is_still_one_folder_name_for_a_load() -> None:
    """A load names a folder that is there or not; only a writer must avoid
    names the scanner passes over."""
    assert model_name_problem(".hidden") is None
    assert model_name_problem("m.tmp") is None
