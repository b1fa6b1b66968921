"""The filtered, sorted order of the slot table's rows, re-sorted only when it must be.

Pure (no Textual). Unknown values sort last in both directions; ties keep row-key order.

The default order ("default", no column) does not move with live values: rows with a problem
first (an alert on the row's slot, backend or GPU; the worst first), then host, GPU, slot and
backend. Rows move only when an alert starts or ends, or a slot comes or goes, never because a
number changed. P95/SLO sorts by the ratio of p95 to its SLO (how far from breaching).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from gpucon.model.fleet import BackendState
from gpucon.widgets.slot_cells import NO_LATENCY_NOW
from gpucon.widgets.slot_rows import RowKey, RowValues

_STATE_RANK = {s.value: i for i, s in enumerate(BackendState)}

# what a column sorts by (None, a value no source reports, sorts last in both directions)
SortValue: TypeAlias = str | int | float | tuple[float, float]

DEFAULT_SORT = "default"


def gpu_target(row: RowValues) -> str:
    """How alerts name this row's GPU (``host/gpuN``): a MIG slot's id less its instance."""
    head, _, tail = row.slot_id.rpartition("/")
    return head if head and tail.startswith("gi") else row.slot_id


def row_targets(key: RowKey, row: RowValues) -> tuple[str, ...]:
    """The alert targets that name this row: its slot, its backend, its GPU."""
    slot_id, backend = key
    return (slot_id, backend, gpu_target(row)) if backend else (slot_id, gpu_target(row))


def _ratio(row: RowValues) -> float | None:
    if row.p95 is None or row.state in NO_LATENCY_NOW:  # shown as absent: sorts as absent
        return None
    return row.p95 / row.slo if row.slo else row.p95


def _static(row: RowValues) -> SortValue:
    """What the default order reads of a row's values (its names: they rarely change)."""
    return f"{row.host}\n{row.gpu}"


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
    "p95": _ratio,
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

    def __init__(self, sort_key: str = DEFAULT_SORT, reverse: bool = False) -> None:
        self.rows: dict[RowKey, RowValues] = {}
        # the worst alert severity (1 warn, 2 crit, ...) on each row that has one
        self.problems: dict[RowKey, int] = {}
        self.keys: list[RowKey] = []
        self.sort_key = sort_key
        self.reverse = reverse
        self.filter = ""
        self.sorts = 0  # how many times the order was recomputed (tests, benchmarks)

    def update(
        self, rows: dict[RowKey, RowValues], problems: Mapping[RowKey, int] | None = None
    ) -> set[RowKey]:
        """Take this tick's rows (and which of them have alerts); return the keys whose values
        changed (or are new)."""
        old = self.rows
        changed = {k for k, v in rows.items() if (was := old.get(k)) is not v and was != v}
        self.rows = rows
        new_problems = dict(problems or {})
        problems_moved = new_problems != self.problems
        self.problems = new_problems
        if (
            len(rows) != len(old)
            or any(k not in old for k in changed)
            or (problems_moved and self.sort_key == DEFAULT_SORT)
        ):
            self.resort()
        elif changed:
            value = SORT_VALUE.get(self.sort_key, _static)
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
        if self.sort_key == DEFAULT_SORT:
            problems = self.problems
            ranked = sorted(((-problems.get(k, 0), v.host, v.gpu, k[0], k[1]), k) for k, v in items)
            self.keys = [k for _, k in ranked]
            if self.reverse:
                self.keys.reverse()
            return
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


def problem_rows(
    rows: Mapping[RowKey, RowValues], severity_by_target: Mapping[str, int]
) -> dict[RowKey, int]:
    """The rows an alert names (by slot, backend or GPU), each with its worst severity + 1
    (so that an INFO alert still counts as a problem: 1 info, 2 warn, 3 crit)."""
    if not severity_by_target:
        return {}
    found: dict[RowKey, int] = {}
    for key, row in rows.items():
        worst = max((severity_by_target.get(t, -1) for t in row_targets(key, row)), default=-1)
        if worst >= 0:
            found[key] = worst + 1
    return found


def first_row_of(
    keys: Sequence[RowKey], rows: Mapping[RowKey, RowValues], target: str
) -> RowKey | None:
    """The first row (in shown order) that ``target`` names: its backend, slot or GPU."""
    for pick in (lambda k, r: k[1] == target, lambda k, r: target in row_targets(k, r)):
        for key in keys:
            if pick(key, rows[key]):
                return key
    return None
