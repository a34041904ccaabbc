"""Where a login sends the browser: a path on this site as a browser reads
it (tabs and newlines dropped, backslashes as slashes, dot segments
resolved), never another origin (edgebox/dashboard/next_page.py)."""

from __future__ import annotations

import pytest

from edgebox.dashboard.next_page import same_site_path


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example",
        "/\t/evil.example",  # next=/%09/evil.example, form-decoded
        "/\n/evil.example",
        "/\r\n/evil.example",
        "\t//evil.example",
        " //evil.example",
        "\x00//evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "\\/evil.example",
        "/\\\tevil.example",
        "https:evil.example",
        "https://evil.example/",
        "http:/evil.example",
        "javascript:alert(1)",
        "evil.example",
        "",
        "/..//evil.example",
        "/a/..//evil.example",
        "/%2e%2e//evil.example",
        "/.%2E//evil.example",
        "/./\\evil.example",
    ],
)
def test_anything_not_a_path_on_this_site_goes_home(target):
    assert same_site_path(target) == "/"


@pytest.mark.parametrize(
    ("target", "path"),
    [
        ("/", "/"),
        ("/streams", "/streams"),
        ("/models?name=lane&x=1", "/models?name=lane&x=1"),
        ("  /events\t", "/events"),
        ("/str\teams", "/streams"),
        ("/a/../streams", "/streams"),
        ("/..", "/"),
        ("/streams/.", "/streams/"),
        ("/models?next=//evil.example", "/models?next=//evil.example"),
        ("/streams\r\nSet-Cookie: x=1", "/streamsSet-Cookie:%20x=1"),
        ("/caf\u00e9 x\x01y", "/caf%C3%A9%20x%01y"),
        ("/models#lane", "/models#lane"),
    ],
)
def test_a_path_on_this_site_is_kept_as_the_browser_reads_it(target, path):
    assert same_site_path(target) == path
