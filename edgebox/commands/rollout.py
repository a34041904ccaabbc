"""``edgebox rollout status|promote|abort|release MODEL``: the operator's
side of a rollout (docs/http_api.md, "Rollouts"), sent to a running daemon
over its HTTP API, so the command obeys the same access rules as model
control: nothing is needed on the device itself; from elsewhere, the API key
(``--api-key-file``) or a restricted API's header (``--header``).

Exit statuses: 0 done, 1 the daemon refused (its message on stderr), 2 a
command line that does not parse, 69 no daemon answered.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from pathlib import Path

from edgebox.commands.console import EXIT_OK, EXIT_PROBLEMS, EXIT_UNREACHABLE, argument_type
from edgebox.commands.rollout_summary import summaries, summary
from edgebox.protocol.access_policy import API_KEY_HEADER, read_api_key
from edgebox.protocol.http.daemon_client import (
    DEFAULT_URL,
    DaemonClient,
    DaemonRefused,
    DaemonUnreachable,
    daemon_url,
)
from edgebox.repository.names import model_name_problem

_ACTIONS = {
    "promote": "serve the new version now, whatever its figures (it is then watched)",
    "abort": "reject the new version now; it stays held until released",
    "release": "let the model's held versions load again (they roll out like new ones)",
}
"""The verbs besides ``status``, as ``RepositoryControl.rollout_action`` names them."""

_FORBIDDEN_HINT = (
    "give the daemon's API key with --api-key-file, or a restricted API's header "
    "with --header NAME=VALUE"
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    rollout = commands.add_parser(
        "rollout",
        help="show, promote, abort or release a model's rollout on a running daemon",
        description="Show or decide a model's rollout on a running daemon, through its HTTP "
        "API. Exit 0 when done, 1 when the daemon refused, 69 when no daemon answered.",
    )
    actions = rollout.add_subparsers(dest="rollout_action", metavar="ACTION", required=True)
    options = _connection_options()
    status = actions.add_parser(
        "status",
        parents=[options],
        help="a model's rollout, held versions and last outcome; without MODEL, every "
        "rollout in progress",
    )
    status.add_argument(
        "model", nargs="?", default=None, type=argument_type(_model), metavar="MODEL"
    )
    for action, text in _ACTIONS.items():
        parser = actions.add_parser(action, parents=[options], help=text)
        parser.add_argument("model", type=argument_type(_model), metavar="MODEL")


def _connection_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--url",
        type=argument_type(daemon_url),
        default=DEFAULT_URL,
        help=f"the daemon's HTTP API, as HOST:PORT or a URL (default: {DEFAULT_URL})",
    )
    options.add_argument(
        "--api-key-file",
        dest="api_key",
        type=argument_type(lambda text: read_api_key(Path(text))),
        default=None,
        metavar="FILE",
        help=f"file holding the daemon's api_key_file key, sent in header '{API_KEY_HEADER}' "
        "(needed from another machine)",
    )
    options.add_argument(
        "--header",
        dest="headers",
        type=argument_type(_header),
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="header to send, for an API restricted with --http-restricted-api (repeatable)",
    )
    options.add_argument(
        "--json", action="store_true", help="print the daemon's JSON instead of a summary"
    )
    options.add_argument(
        "--timeout-s",
        type=argument_type(_positive_seconds),
        default=300.0,
        metavar="S",
        help="how long to wait for the daemon's answer (a release may load a model; default: 300)",
    )
    return options


def run(args: argparse.Namespace) -> int:
    headers = dict(args.headers)
    if args.api_key is not None:
        headers[API_KEY_HEADER] = args.api_key
    client = DaemonClient(args.url, headers, args.timeout_s)
    action, model = args.rollout_action, args.model
    try:
        if model is None:
            document = client.get("/v2/repository/rollouts")
        elif action == "status":
            document = client.get(f"/v2/repository/models/{_segment(model)}/rollout")
        else:
            document = client.post(f"/v2/repository/models/{_segment(model)}/rollout/{action}")
    except DaemonRefused as refusal:
        hint = f" ({_FORBIDDEN_HINT})" if refusal.forbidden else ""
        print(f"edgebox: {refusal}{hint}", file=sys.stderr)
        return EXIT_PROBLEMS
    except DaemonUnreachable as failure:
        print(f"edgebox: {failure}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print(json.dumps(document, indent=2))
    elif model is None:
        print(summaries(document))
    else:
        print(summary(document))
    return EXIT_OK


def _segment(model: str) -> str:
    """A model name as one path segment, which the daemon decodes back."""
    return urllib.parse.quote(model, safe="")


def _model(text: str) -> str:
    """A name the daemon could know: one folder name (``repository.names``),
    so a '/' cannot turn the request into another path."""
    problem = model_name_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _header(text: str) -> tuple[str, str]:
    name, separator, value = text.partition("=")
    if not separator or not name or not value or not text.isprintable():
        raise ValueError(f"expected NAME=VALUE on one line, got {text!r}")
    return name, value


def _positive_seconds(text: str) -> float:
    seconds = float(text)
    if not seconds > 0:
        raise ValueError(f"expected a number of seconds above 0, got '{text}'")
    return seconds
