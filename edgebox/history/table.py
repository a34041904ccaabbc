"""A tier's series as the API gives them: JSON columns (each series its
timestamps and one list per named column, as uPlot draws them) or CSV rows
(one per point, a header row first) holding exactly the same values.

CSV cells that start like a spreadsheet formula (``=``, ``+``, ``-``, ``@``)
get a leading ``'`` so a model named ``=HYPERLINK(...)`` stays text when the
file is opened (names are the only text; numbers never start so).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from edgebox.history.counters import MODEL_COLUMNS
from edgebox.history.device import column_order
from edgebox.history.store import HistoryStore
from edgebox.history.tiers import Tier

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def models_document(
    store: HistoryStore, tier: Tier, model: str | None, version: str | None
) -> dict[str, Any]:
    return {
        **_tier_fields(tier),
        "series": "models",
        "columns": list(MODEL_COLUMNS),
        "models": [
            {
                "model": name,
                "version": number,
                "timestamps": [point.timestamp for point in points],
                "values": {
                    column: [point.value[index] for point in points]
                    for index, column in enumerate(MODEL_COLUMNS)
                },
            }
            for (name, number), points in store.series(tier.name, model, version)
        ],
    }


def device_document(store: HistoryStore, tier: Tier) -> dict[str, Any]:
    points = store.device(tier.name)
    columns = column_order(name for point in points for name in point.value)
    return {
        **_tier_fields(tier),
        "series": "device",
        "columns": columns,
        "device": {
            "timestamps": [point.timestamp for point in points],
            "values": {column: [point.value.get(column) for point in points] for column in columns},
        },
    }


def _tier_fields(tier: Tier) -> dict[str, Any]:
    return {"range": tier.name, "step_s": tier.step_s, "span_s": tier.span_s}


def csv_rows(document: dict[str, Any]) -> Iterator[list[Any]]:
    """The document's rows, header first: ``time_utc``, ``timestamp``, then
    ``model`` and ``version`` for model series, then the named columns."""
    columns = document["columns"]
    if document["series"] == "models":
        yield ["time_utc", "timestamp", "model", "version", *columns]
        for series in document["models"]:
            values = series["values"]
            for index, timestamp in enumerate(series["timestamps"]):
                yield [
                    _utc(timestamp),
                    timestamp,
                    series["model"],
                    series["version"],
                    *(values[column][index] for column in columns),
                ]
    else:
        yield ["time_utc", "timestamp", *columns]
        device = document["device"]
        for index, timestamp in enumerate(device["timestamps"]):
            yield [_utc(timestamp), timestamp, *(device["values"][c][index] for c in columns)]


def csv_text(document: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in csv_rows(document):
        writer.writerow(["" if cell is None else _cell(cell) for cell in row])
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")
