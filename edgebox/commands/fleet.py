"""``edgebox fleet keygen|pack|deploy|status|rollback``: the operator's side
of the fleet (docs/fleet.md). It talks to the group's MQTT broker only, never
to a device, and keeps nothing between runs: the broker's retained messages
are the fleet's state.

Exit statuses: 0 done (deploy: every targeted device serves the version),
1 a problem (a device rejected or failed the version, a wave timed out, the
current desired state cannot be built upon), 2 a command line that does not
parse (a key file that is not a private key included), 69 no broker answered.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edgebox.commands.console import EXIT_OK, EXIT_PROBLEMS, EXIT_UNREACHABLE, argument_type
from edgebox.errors import EdgeboxError
from edgebox.fleet.document import GROUP_PATTERN, Artifact, WantedModel
from edgebox.fleet.operator.artifact_digest import file_digest, url_digest
from edgebox.fleet.operator.broker import BrokerOptions, BrokerUnreachable
from edgebox.fleet.operator.deployment import FleetTarget, GroupSession, deploy, rollback
from edgebox.fleet.operator.table import device_rows, render
from edgebox.fleet.operator.waves import parse_waves
from edgebox.fleet.signing import generate_key, key_id, load_private_key, load_public_key
from edgebox.mqtt.settings import parse_broker_url, topic_prefix_problem
from edgebox.repository.names import model_name_problem

DEFAULT_WAIT_S = 600.0
ROLLOUT_POLICIES = ("immediate", "shadow", "canary")


def add_parser(commands: argparse._SubParsersAction) -> None:
    fleet = commands.add_parser(
        "fleet",
        help="deploy model versions to a group of devices through their MQTT broker",
        description="Sign and publish a group's desired state, watch its devices converge, "
        "roll back (docs/fleet.md). Exit 0 when done, 1 on a problem (a device rejected the "
        "version, a wave timed out), 2 on a bad command line, 69 when no broker answered.",
    )
    verbs = fleet.add_subparsers(dest="fleet_action", metavar="ACTION", required=True)

    keygen = verbs.add_parser(
        "keygen", help="a new Ed25519 signing key (KEY, mode 0600) and KEY.pub beside it"
    )
    keygen.add_argument("key", type=Path, metavar="KEY")

    pack = verbs.add_parser("pack", help="an artifact (tar.gz) of one model version folder")
    pack.add_argument("version_dir", type=Path, metavar="VERSION_DIR")
    pack.add_argument("out", type=Path, metavar="OUT")
    pack.add_argument("--json", action="store_true", help="print one JSON object")

    broker = _broker_options()
    deploy_parser = verbs.add_parser(
        "deploy",
        parents=[broker],
        help="publish a model version to a group, wave by wave, halting at the first "
        "device that rejects or fails it",
    )
    _signing_options(deploy_parser)
    deploy_parser.add_argument("--model", required=True, type=argument_type(_model), metavar="M")
    deploy_parser.add_argument(
        "--version", required=True, type=argument_type(_version), metavar="N"
    )
    deploy_parser.add_argument(
        "--artifact",
        required=True,
        type=argument_type(_url),
        metavar="URL",
        help="where devices download the version's artifact (http:// or https://)",
    )
    deploy_parser.add_argument(
        "--artifact-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="the artifact's local copy, hashed instead of downloading URL",
    )
    deploy_parser.add_argument(
        "--artifact-max-mb",
        type=argument_type(_positive),
        default=512.0,
        metavar="MB",
        help="largest artifact downloaded to hash it (default: 512)",
    )
    deploy_parser.add_argument(
        "--artifact-ca-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="CA certificates for an https:// artifact URL (default: the system's)",
    )
    deploy_parser.add_argument(
        "--waves",
        type=argument_type(parse_waves),
        default=parse_waves("100%"),
        metavar="W,W,...",
        help="device counts or percentages of the group's known devices, e.g. 1,10%%,100%% "
        "(default: 100%%); a final 100%% targets every device, present and future",
    )
    deploy_parser.add_argument(
        "--wait",
        dest="wait_s",
        type=argument_type(_positive),
        default=DEFAULT_WAIT_S,
        metavar="SECONDS",
        help=f"longest wait for each wave to converge (default: {DEFAULT_WAIT_S:g})",
    )
    _rollout_options(deploy_parser)

    status = verbs.add_parser(
        "status",
        parents=[broker],
        help="the group's devices: online or not, generation, model states, last seen",
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")

    back = verbs.add_parser(
        "rollback",
        parents=[broker],
        help="send a model back to its previous version on every device of the group",
    )
    _signing_options(back)
    back.add_argument("--model", required=True, type=argument_type(_model), metavar="M")
    back.add_argument(
        "--wait",
        dest="wait_s",
        type=argument_type(_positive),
        default=None,
        metavar="SECONDS",
        help="watch the devices for up to SECONDS (default: publish and return)",
    )
    _rollout_options(back, default_help="immediate: a rollback is not put on trial")


def _broker_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--broker",
        required=True,
        type=argument_type(_broker_url),
        metavar="URL",
        help="the group's MQTT broker: mqtt://HOST[:PORT] or mqtts://, ws://, wss://",
    )
    options.add_argument(
        "--group", required=True, type=argument_type(_group), metavar="G", help="the device group"
    )
    options.add_argument(
        "--prefix",
        default="edgebox",
        type=argument_type(_prefix),
        help="the devices' mqtt.topic_prefix (default: edgebox)",
    )
    options.add_argument(
        "--ca-file", type=Path, default=None, metavar="FILE", help="CA certificates for mqtts://"
    )
    options.add_argument("--username", default="", help="user name sent to the broker")
    options.add_argument(
        "--password-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="file holding the broker password on one line",
    )
    options.add_argument(
        "--settle",
        dest="settle_s",
        type=argument_type(_seconds),
        default=1.0,
        metavar="SECONDS",
        help="time given to the broker's retained messages to arrive (default: 1)",
    )
    return options


def _signing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key",
        required=True,
        dest="private_key",
        type=argument_type(_private_key),
        metavar="KEY",
        help="the Ed25519 private key (from `edgebox fleet keygen`) the devices trust",
    )


def _rollout_options(parser: argparse.ArgumentParser, default_help: str = "") -> None:
    parser.add_argument(
        "--rollout",
        choices=ROLLOUT_POLICIES,
        default=None,
        help="the on-device rollout policy for this version (default: "
        + (default_help or "each device's own policy for the model")
        + ")",
    )
    parser.add_argument(
        "--rollout-samples",
        type=argument_type(_samples),
        default=None,
        metavar="N",
        help="answers compared (shadow) or served (canary) before the version is judged",
    )


def run(args: argparse.Namespace) -> int:
    try:
        return _ACTIONS[args.fleet_action](args)
    except BrokerUnreachable as failure:
        print(f"edgebox: {failure}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except EdgeboxError as problem:
        print(f"edgebox: {problem}", file=sys.stderr)
        return EXIT_PROBLEMS


def _keygen(args: argparse.Namespace) -> int:
    public_path = generate_key(args.key)
    print(f"private key: {args.key} (mode 0600; keep it off the devices)")
    print(f"public key:  {public_path} (list it in the devices' fleet.trusted_keys)")
    print(f"key id:      {key_id(load_public_key(public_path))}")
    return EXIT_OK


def _pack(args: argparse.Namespace) -> int:
    from edgebox.fleet.artifacts import pack  # helper ART's module, merged separately

    packed = pack(args.version_dir, args.out)
    if args.json:
        print(json.dumps({"path": str(args.out), "sha256": packed.sha256, "size": packed.size}))
    else:
        print(f"{args.out}: sha256 {packed.sha256}, {packed.size} bytes")
    return EXIT_OK


def _deploy(args: argparse.Namespace) -> int:
    if args.artifact_file is not None:
        sha256, size = file_digest(args.artifact_file)
    else:
        max_bytes = int(args.artifact_max_mb * 1024 * 1024)
        sha256, size = url_digest(args.artifact, max_bytes, args.artifact_ca_file)
    wanted = WantedModel(
        args.model, args.version, Artifact(args.artifact, sha256, size), rollout=_rollout(args)
    )
    done = deploy(_target(args), args.private_key, wanted, args.waves, args.wait_s)
    return EXIT_OK if done else EXIT_PROBLEMS


def _rollback(args: argparse.Namespace) -> int:
    rollout = _rollout(args) or {"policy": "immediate"}
    done = rollback(_target(args), args.private_key, args.model, rollout, args.wait_s)
    return EXIT_OK if done else EXIT_PROBLEMS


def _status(args: argparse.Namespace) -> int:
    target = _target(args)
    with GroupSession(target) as session:
        views = session.views()
    if args.json:
        document = {"group": target.group, "devices": [view.as_dict() for view in views]}
        print(json.dumps(document, indent=2))
    elif not views:
        print(f"no device of group '{target.group}' has reported")
    else:
        print(render(device_rows(views)))
    return EXIT_OK


_ACTIONS = {
    "keygen": _keygen,
    "pack": _pack,
    "deploy": _deploy,
    "status": _status,
    "rollback": _rollback,
}


def _target(args: argparse.Namespace) -> FleetTarget:
    options = BrokerOptions(args.broker, args.ca_file, args.username, args.password_file)
    return FleetTarget(options, args.prefix, args.group, args.settle_s)


def _rollout(args: argparse.Namespace) -> dict | None:
    if args.rollout is None:
        if args.rollout_samples is not None:
            raise EdgeboxError("--rollout-samples needs --rollout shadow or canary")
        return None
    rollout: dict = {"policy": args.rollout}
    if args.rollout_samples is not None:
        rollout["samples"] = args.rollout_samples
    return rollout


def _private_key(text: str):
    try:
        return load_private_key(Path(text))
    except EdgeboxError as problem:
        raise ValueError(str(problem)) from None


def _broker_url(text: str) -> str:
    parse_broker_url(text)
    return text


def _group(text: str) -> str:
    if not GROUP_PATTERN.fullmatch(text):
        raise ValueError(
            f"expected letters, digits, '_', '.' or '-' (one topic level), got {text!r}"
        )
    return text


def _prefix(text: str) -> str:
    problem = topic_prefix_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _model(text: str) -> str:
    problem = model_name_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _version(text: str) -> int:
    version = int(text)
    if version < 1:
        raise ValueError(f"expected a version number from 1, got {text!r}")
    return version


def _url(text: str) -> str:
    if not text.startswith(("http://", "https://")) or len(text) > 2048:
        raise ValueError(f"expected an http:// or https:// URL, got {text[:80]!r}")
    return text


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise ValueError(f"expected a number above 0, got {text!r}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 60:
        raise ValueError(f"expected seconds from 0 to 60, got {text!r}")
    return value


def _samples(text: str) -> int:
    samples = int(text)
    if samples < 1:
        raise ValueError(f"expected at least 1, got {text!r}")
    return samples
