"""The rollout resource (``Rollouts.status``, docs/http_api.md) as the few
lines an operator reads at a terminal: what is on trial against what, how far
it got, how the two versions compare, what is held and how the last rollout
ended. ``--json`` prints the resource itself; this is only its summary, so a
field it leaves out is never lost, only not shown.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

_LABEL_WIDTH = 11


def summaries(documents: Iterable[dict]) -> str:
    """Several resources (``GET /v2/repository/rollouts``), a blank line apart."""
    texts = [summary(document) for document in documents]
    return "\n\n".join(texts) if texts else "no rollout in progress"


def summary(document: dict) -> str:
    lines = [f"{document.get('model', '?')}: {_headline(document)}"]
    stage = document.get("stage", "none")
    if stage == "watching" and isinstance(document.get("watch"), dict):
        watch = document["watch"]
        lines.append(
            _line(
                "watch",
                f"{watch.get('requests', 0)} requests, {watch.get('errors', 0)} errors, "
                f"p95 {_ms(watch.get('p95_ms'))}",
            )
        )
    if stage != "none":
        lines += _figures(document)
    for held in document.get("held", []):
        lines.append(
            _line(
                "held",
                f"version {held.get('version')}, {held.get('kind')} since "
                f"{_when(held.get('since'))}: {held.get('reason', '')}",
            )
        )
    last = document.get("last")
    if isinstance(last, dict):
        lines.append(
            _line(
                "last",
                f"version {last.get('version')} {last.get('result')} at "
                f"{_when(last.get('at'))}: {last.get('reason', '')}",
            )
        )
    return "\n".join(lines)


def _headline(document: dict) -> str:
    stage = document.get("stage", "none")
    version, serving = document.get("version"), document.get("serving_version")
    if stage == "none":
        return "no rollout in progress"
    if stage == "watching":
        until = _when((document.get("watch") or {}).get("until"))
        return f"version {version} promoted, watched until {until}; version {serving} still loaded"
    return (
        f"{stage} rollout of version {version} against version {serving}, "
        f"since {_when(document.get('started'))}"
    )


def _figures(document: dict) -> list[str]:
    """The rollout's figures; for a watched version, those it was promoted on."""
    version, serving = document.get("version"), document.get("serving_version")
    samples = f"{document.get('samples', 0)}/{document.get('samples_wanted', '?')}"
    if document.get("dropped"):
        samples += f" ({document['dropped']} dropped while busy)"
    lines = [_line("samples", samples)]
    if document.get("policy") == "shadow":
        agreement = document.get("agreement")
        shown = "-" if agreement is None else f"{agreement * 100:.1f}%"
        counts = f"({document.get('agreed', 0)} of {document.get('samples', 0)})"
        lines.append(_line("agreement", f"{shown} {counts}"))
    lines.append(_line("errors", str(document.get("errors", 0))))
    lines.append(
        _line(
            "p95",
            f"version {version} {_ms(document.get('candidate_p95_ms'))}, "
            f"version {serving} {_ms(document.get('serving_p95_ms'))}",
        )
    )
    if document.get("last_disagreement"):
        lines.append(_line("disagreed", document["last_disagreement"]))
    return lines


def _line(label: str, text: str) -> str:
    return f"  {label:<{_LABEL_WIDTH}} {text}"


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def _when(epoch_s) -> str:
    """Local time on this machine: the daemon sends seconds since the epoch."""
    if not isinstance(epoch_s, (int, float)):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_s))
