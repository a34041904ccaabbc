"""The transport-neutral access policy: Triton's ``API[,API...]:KEY=VALUE``
restrictions, the appliance's loopback-only default for the control APIs, and
the ``api_key_file`` key.

Expected texts and parse results marked "Triton 2.51" were observed from a real
tritonserver 2.51.0 (PyPI nvidia-pytriton 0.7.0) started with
``--http-restricted-api``; see /work/notes/triton.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgebox.protocol.access_policy import (
    API_KEY_HEADER,
    APIS,
    LOOPBACK_ONLY_BY_DEFAULT,
    AccessPolicy,
    Restriction,
    is_loopback,
    parse_restrictions,
    read_api_key,
)

REMOTE = "192.0.2.7"
KEY = "k" * 32

# ------------------------------------------------------------------ parsing


def test_api_names_are_tritons() -> None:
    assert APIS == (
        "model-repository",
        "shared-memory",
        "statistics",
        "trace",
        "logging",
        "model-config",
        "health",
        "metadata",
        "inference",
    )
    assert sorted(LOOPBACK_ONLY_BY_DEFAULT) == [
        "logging",
        "model-repository",
        "shared-memory",
        "trace",
    ]


def test_one_group_restricts_each_listed_api_with_its_header() -> None:
    restrictions = parse_restrictions(["model-repository,statistics:admin-key=secret"])
    group = Restriction(("model-repository", "statistics"), "admin-key", "secret")
    assert restrictions == {"model-repository": group, "statistics": group}


def test_repeated_groups_accumulate() -> None:
    restrictions = parse_restrictions(["model-repository:a=1", "inference,health:b=2"])
    assert sorted(restrictions) == ["health", "inference", "model-repository"]
    assert restrictions["health"].header == "b"


@pytest.mark.parametrize(
    ("spec", "header", "value"),
    [
        # Triton 2.51 splits at the first ':' and then at the first '='.
        ("model-repository:a=b=c", "a", "b=c"),
        ("model-repository:a=b,c", "a", "b,c"),
        ("model-repository:A-Key=Val", "A-Key", "Val"),
    ],
)
def test_key_and_value_split_like_triton(spec: str, header: str, value: str) -> None:
    restriction = parse_restrictions([spec])["model-repository"]
    assert (restriction.header, restriction.value) == (header, value)


def test_the_value_is_not_in_the_repr() -> None:
    restriction = parse_restrictions(["trace:admin-key=hunter2hunter2"])["trace"]
    assert "hunter2" not in repr(restriction)


@pytest.mark.parametrize(
    "spec",
    # Each one is refused by Triton 2.51 as a format error.
    [
        "model-repository:a",
        "model-repository",
        "model-repository:=1",
        "model-repository:a=",
        ":a=1",
    ],
)
def test_malformed_group_is_refused(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_restrictions([spec])
    assert str(info.value) == (f"expected '<API>[,<API>...]:<header>=<value>', got '{spec}'")


@pytest.mark.parametrize(
    ("spec", "api"),
    # Triton 2.51: names are case-sensitive and not trimmed; an empty one is unknown.
    [
        ("bogus:a=1", "bogus"),
        ("Model-Repository:a=1", "Model-Repository"),
        ("model-repository, statistics:a=1", " statistics"),
        ("model-repository,:a=1", ""),
    ],
)
def test_unknown_api_is_refused_with_the_choices(spec: str, api: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_restrictions([spec])
    assert str(info.value) == (
        f"unknown API '{api}' in '{spec}'; expected one of model-repository, shared-memory, "
        "statistics, trace, logging, model-config, health, metadata, inference"
    )


@pytest.mark.parametrize(
    "specs",
    # Triton 2.51 refuses all three ("can not be specified in multiple config groups").
    [
        ["model-repository:a=1", "model-repository:b=2"],
        ["model-repository,model-repository:a=1"],
        ["model-repository:a=1", "model-repository:a=1"],
    ],
)
def test_an_api_in_two_groups_is_refused(specs: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        parse_restrictions(specs)
    assert str(info.value) == (
        "API 'model-repository' is in more than one group; each API takes one header"
    )


def test_header_name_that_no_client_can_send_is_refused() -> None:
    # Triton 2.51 starts with 'a:b' as the header and then refuses every request.
    with pytest.raises(ValueError) as info:
        parse_restrictions(["model-repository:a:b=c"])
    assert str(info.value) == (
        "header name 'a:b' in 'model-repository:a:b=c' is not a valid HTTP header name "
        "(letters, digits and !#$%&'*+-.^_`|~)"
    )


@pytest.mark.parametrize("value", [" secret", "secret ", "se\tcret", "s\u00e9cret"])
def test_value_that_no_client_can_send_is_refused(value: str) -> None:
    # Triton 2.51 trims leading spaces of the header and answers 403 to a trailing one.
    with pytest.raises(ValueError) as info:
        parse_restrictions([f"trace:k={value}"])
    assert str(info.value) == (
        "the value for header 'k' must be printable ASCII, without leading or trailing spaces"
    )


# ------------------------------------------------------------------ loopback


@pytest.mark.parametrize(
    ("peer", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("192.0.2.7", False),
        ("::ffff:192.0.2.7", False),
        ("10.0.0.1", False),
        ("fe80::1", False),
        ("", False),
        ("not-an-address", False),
    ],
)
def test_loopback_addresses(peer: str, loopback: bool) -> None:
    assert is_loopback(peer) is loopback


# ------------------------------------------------------------------ decisions


def test_explicit_restriction_refuses_a_missing_or_wrong_header() -> None:
    policy = AccessPolicy(parse_restrictions(["model-repository,statistics:admin-key=secret"]))
    for headers in ({}, {"admin-key": "wrong"}, {"admin-key": "SECRET"}):
        denial = policy.check("statistics", headers, "127.0.0.1")
        assert denial is not None
        assert (denial.api, denial.header) == ("statistics", "admin-key")
    assert policy.check("statistics", {"admin-key": "secret"}, "127.0.0.1") is None


def test_explicit_restriction_applies_to_every_peer_and_replaces_the_default() -> None:
    policy = AccessPolicy(parse_restrictions(["model-repository:admin-key=secret"]))
    assert policy.check("model-repository", {}, "127.0.0.1") is not None
    assert policy.check("model-repository", {"admin-key": "secret"}, REMOTE) is None


def test_header_name_is_looked_up_case_insensitively() -> None:
    # Triton 2.51: 'A-Key=Val' accepts 'a-key: Val'; the denial names 'A-Key' as configured.
    policy = AccessPolicy(parse_restrictions(["trace:A-Key=Val"]))
    assert policy.check("trace", {"a-key": "Val"}, REMOTE) is None
    denial = policy.check("trace", {"a-key": "val"}, REMOTE)
    assert denial is not None and denial.header == "A-Key"


def test_header_prefix_is_prepended_for_a_transport() -> None:
    policy = AccessPolicy(
        parse_restrictions(["health:admin-key=secret"]), header_prefix="triton-grpc-protocol-"
    )
    assert policy.check("health", {"admin-key": "secret"}, "::1") is not None
    assert policy.check("health", {"triton-grpc-protocol-admin-key": "secret"}, "::1") is None
    assert policy.check("health", {}, "::1").header == "triton-grpc-protocol-admin-key"


@pytest.mark.parametrize("api", sorted(LOOPBACK_ONLY_BY_DEFAULT))
def test_control_apis_are_loopback_only_by_default(api: str) -> None:
    policy = AccessPolicy({})
    assert policy.check(api, {}, "127.0.0.1") is None
    assert policy.check(api, {}, "::1") is None
    denial = policy.check(api, {}, REMOTE)
    assert denial is not None
    assert (denial.api, denial.header) == (api, None)


@pytest.mark.parametrize("api", ["statistics", "model-config", "health", "metadata", "inference"])
def test_other_apis_are_open_by_default(api: str) -> None:
    assert AccessPolicy({}).check(api, {}, REMOTE) is None


def test_unclassified_request_is_left_to_the_router() -> None:
    assert AccessPolicy({}).check(None, {}, REMOTE) is None


def test_unknown_peer_is_not_loopback() -> None:
    assert AccessPolicy({}).check("logging", {}, "") is not None


def test_api_key_lets_remote_clients_use_the_control_apis() -> None:
    policy = AccessPolicy({}, api_key=KEY)
    assert policy.check("model-repository", {API_KEY_HEADER: KEY}, REMOTE) is None
    for headers in ({}, {API_KEY_HEADER: KEY[:-1]}, {API_KEY_HEADER: KEY + "x"}):
        denial = policy.check("model-repository", headers, REMOTE)
        assert denial is not None
        assert denial.header == "edgebox-api-key"
    assert policy.check("model-repository", {}, "127.0.0.1") is None


def test_api_key_does_not_satisfy_an_explicit_restriction() -> None:
    policy = AccessPolicy(parse_restrictions(["trace:admin-key=secret"]), api_key=KEY)
    assert policy.check("trace", {API_KEY_HEADER: KEY}, REMOTE) is not None
    assert policy.check("logging", {API_KEY_HEADER: KEY}, REMOTE) is None


# ------------------------------------------------------------------ api_key_file


def key_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "api.key"
    path.write_text(text, encoding="ascii")
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640])
def test_api_key_file_is_read_without_its_newline(tmp_path: Path, mode: int) -> None:
    assert read_api_key(key_file(tmp_path, KEY + "\n", mode)) == KEY


@pytest.mark.parametrize(
    ("mode", "who"),
    [(0o644, "every user"), (0o604, "every user"), (0o620, "its group"), (0o602, "every user")],
)
def test_api_key_file_others_can_read_or_change_is_refused(
    tmp_path: Path, mode: int, who: str
) -> None:
    path = key_file(tmp_path, KEY, mode)
    with pytest.raises(ValueError) as info:
        read_api_key(path)
    verb = "written" if mode & 0o022 and not mode & 0o004 else "read"
    assert str(info.value) == (
        f"'{path}' can be {verb} by {who} (mode {mode:04o}); run: chmod 600 '{path}' "
        "(or 640 with the daemon's group)"
    )


def test_missing_api_key_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        read_api_key(tmp_path / "nope.key")
    assert str(info.value) == f"cannot read '{tmp_path / 'nope.key'}': No such file or directory"


def test_api_key_file_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        read_api_key(tmp_path)
    assert str(info.value) == f"'{tmp_path}' is not a regular file"


def test_short_api_key_is_refused(tmp_path: Path) -> None:
    path = key_file(tmp_path, "short\n")
    with pytest.raises(ValueError) as info:
        read_api_key(path)
    assert str(info.value) == (
        f"the key in '{path}' has 5 characters; use at least 16 "
        f"(for example: openssl rand -hex 32 > '{path}')"
    )


@pytest.mark.parametrize("text", [KEY + " x", KEY + "\n" + KEY, "\u00e9" * 20])
def test_api_key_with_spaces_or_lines_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "api.key"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, 0o600)
    with pytest.raises(ValueError) as info:
        read_api_key(path)
    assert str(info.value) == (
        f"the key in '{path}' must be one line of printable ASCII without spaces"
    )


def test_startup_description_names_headers_but_never_values() -> None:
    restricted = AccessPolicy(
        parse_restrictions(["model-repository,statistics:admin-key=hunter2"]), api_key=KEY
    )
    assert restricted.describe() == (
        "model-repository,statistics need header 'admin-key'; "
        "logging,shared-memory,trace served to loopback or header 'edgebox-api-key'"
    )
    assert AccessPolicy({}).describe() == (
        "logging,model-repository,shared-memory,trace served to loopback clients only"
    )
