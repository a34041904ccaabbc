"""The spool's rows not written to its file: in row order, each with when
it came (the write delay runs from then), and by kind, so that the cap takes
the oldest of a kind without a scan."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from edgebox.mqtt.spool_file import Spooled


class MemoryRows:
    """Used under ``Spool``'s lock."""

    def __init__(self, kinds: Sequence[str]) -> None:
        self._rows: dict[int, tuple[Spooled, float]] = {}
        self._by_kind: dict[str, dict[int, Spooled]] = {kind: {} for kind in kinds}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, row_id: int) -> bool:
        return row_id in self._rows

    def __iter__(self) -> Iterator[Spooled]:
        return (row for row, _ in self._rows.values())

    def add(self, row: Spooled, since: float) -> None:
        """Rows come in row order (a row_id above all others here)."""
        self._rows[row.row_id] = (row, since)
        self._by_kind[row.kind][row.row_id] = row
        self.bytes += row.size

    def forget(self, row_id: int) -> bool:
        """False when ``row_id`` is not here."""
        entry = self._rows.pop(row_id, None)
        if entry is None:
            return False
        row = entry[0]
        del self._by_kind[row.kind][row_id]
        self.bytes -= row.size
        return True

    def first_since(self) -> float | None:
        """When the oldest row came, or None."""
        first = next(iter(self._rows.values()), None)
        return None if first is None else first[1]

    def oldest(self) -> Spooled | None:
        first = next(iter(self._rows.values()), None)
        return None if first is None else first[0]

    def of_topic(self, kind: str, topic: str) -> list[Spooled]:
        return [row for row in self._by_kind[kind].values() if row.topic == topic]

    def oldest_of(self, kind: str) -> Spooled | None:
        rows = self._by_kind[kind]
        return rows[next(iter(rows))] if rows else None

    def entries(self) -> list[tuple[Spooled, float]]:
        return list(self._rows.values())
