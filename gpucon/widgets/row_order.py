"""The filtered, sorted order of the slot table's rows, re-sorted only when it must be.

Pure (no Textual). Unknown values sort last in both directions; ties keep row-key order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

from gpucon.model.fleet import BackendState
from gpucon.widgets.slot_rows import RowKey, RowValues

_STATE_RANK = {s.value: i for i, s in enumerate(BackendState)}

# what a column sorts by (None, a value no source reports, sorts last in both directions)
SortValue: TypeAlias = str | int | float | tuple[float, float]

SORT_VALUE: Mapping[str, Callable[[RowValues], SortValue | None]] = {
    "host": lambda r: r.host or None,
    "gpu": lambda r: r.gpu or None,
    "slot": lambda r: r.slot_id,
    "profile": lambda r: r.profile or None,
    "activity": lambda r: r.activity,
    "trend": lambda r: r.activity,
    "mem": lambda r: None if r.mem_used is None else (r.mem_used, r.mem_total or 0.0),
    "backend": lambda r: r.backend or None,
    "weight": lambda r: r.weight,
    "state": lambda r: _STATE_RANK.get(r.state),
    "inflight": lambda r: r.inflight,
    "p95": lambda r: r.p95,
    "rps": lambda r: r.rps,
}


def search_text(row: RowValues) -> str:
    """What ``/`` filters on: host, slot, backend and model, lower-cased."""
    return f"{row.slot_id}\n{row.host}\n{row.slot}\n{row.backend}\n{row.model}".lower()


def _first(item: tuple[SortValue, RowKey]) -> SortValue:
    return item[0]


def _second(item: tuple[SortValue, RowKey]) -> RowKey:
    return item[1]


class RowOrder:
    """The filtered, sorted row keys; re-sorted only when needed."""

    def __init__(self, sort_key: str = "activity", reverse: bool = True) -> None:
        self.rows: dict[RowKey, RowValues] = {}
        self.keys: list[RowKey] = []
        self.sort_key = sort_key
        self.reverse = reverse
        self.filter = ""
        self.sorts = 0  # how many times the order was recomputed (tests, benchmarks)

    def update(self, rows: dict[RowKey, RowValues]) -> set[RowKey]:
        """Take this tick's rows; return the keys whose values changed (or are new)."""
        old = self.rows
        changed = {k for k, v in rows.items() if (was := old.get(k)) is not v and was != v}
        self.rows = rows
        if len(rows) != len(old) or any(k not in old for k in changed):
            self.resort()
        elif changed:
            value = SORT_VALUE[self.sort_key]
            if any(value(old[k]) != value(rows[k]) for k in changed) or (
                self.filter and any(search_text(old[k]) != search_text(rows[k]) for k in changed)
            ):
                self.resort()
        return changed

    def set_sort(self, sort_key: str, reverse: bool) -> None:
        self.sort_key, self.reverse = sort_key, reverse
        self.resort()

    def set_filter(self, text: str) -> None:
        self.filter = text.strip().lower()
        self.resort()

    def resort(self) -> None:
        self.sorts += 1
        needle = self.filter
        items = self.rows.items()
        if needle:
            items = [(k, v) for k, v in items if needle in search_text(v)]  # type: ignore[assignment]
        value = SORT_VALUE[self.sort_key]
        known: list[tuple[SortValue, RowKey]] = []
        unknown: list[RowKey] = []
        for k, v in items:
            sv = value(v)
            if sv is None:
                unknown.append(k)
            else:
                known.append((sv, k))
        known.sort(key=_second)  # ties keep row-key order in both directions
        known.sort(key=_first, reverse=self.reverse)
        unknown.sort()
        self.keys = [k for _, k in known] + unknown
