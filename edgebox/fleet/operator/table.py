"""The per-device table a deploy, a rollback and ``fleet status`` print:
one row per device and model, plain columns an operator can grep or paste
into an incident note."""

from __future__ import annotations

from datetime import datetime, timezone

from edgebox.fleet.operator.fleet_view import DeviceView

HEADER = ("DEVICE", "STATUS", "GENERATION", "MODEL", "STATE", "VERSION", "SERVED", "LAST SEEN")


def device_rows(views: list[DeviceView], models: list[str] | None = None) -> list[tuple[str, ...]]:
    """``models``: the models to show (the deployed one); None: every model a
    device reports. A device reporting none gets one row all the same."""
    rows = []
    for view in views:
        names = models if models is not None else sorted(view.models) or [""]
        for name in names:
            report = view.model(name)
            rows.append(
                (
                    view.device,
                    view.status,
                    str(view.generation),
                    name or "-",
                    report.state or "-",
                    "-" if report.version is None else str(report.version),
                    ",".join(str(v) for v in report.served) or "-",
                    _when(view.at),
                    _reason(view, report.reason),
                )
            )
    return rows


def render(rows: list[tuple[str, ...]]) -> str:
    header = (*HEADER, "REASON")
    rows = [tuple(_one_line(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def _reason(view: DeviceView, model_reason: str) -> str:
    if model_reason:
        return model_reason
    if view.refused:
        return f"refused generation {view.refused.get('generation')}: {view.refused.get('reason')}"
    return ""


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    try:
        return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "-"


def _one_line(text: str) -> str:
    """Cells come from devices' reports: no line breaks or control
    characters reach the operator's terminal."""
    return "".join(c if c.isprintable() else " " for c in text)[:200]
