"""The filtered, sorted order of the slot table's rows, re-sorted only when it must be.

Pure (no Textual). Unknown values sort last in both directions; ties keep row-key order.
The default order and the filter read only rows' names (``Rows.name_of``), so they never
make the builder work out a row's values; a sort by a live column reads every row.

The default order ("default", no column) does not move with live values: rows with a problem
first (an alert on the row's slot, backend or GPU; the worst first), then host, GPU, slot and
backend. Rows move only when an alert starts or ends, or a slot comes or goes, never because a
number changed. P95/SLO sorts by the ratio of p95 to its SLO (how far from breaching).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter, itemgetter

from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot
from gpucon.widgets.row_builder import RowNames, Rows, same_keys
from gpucon.widgets.row_index import (
    DEFAULT_SORT,
    NameIndex,
    SortValue,
    ordered,
    search_text,
    still_ordered,
)
from gpucon.widgets.slot_cells import NO_LATENCY_NOW, not_serving
from gpucon.widgets.slot_rows import RowKey, RowValues

_STATE_RANK = {s.value: i for i, s in enumerate(BackendState)}
# the same, by the state itself, and the states whose p95 is not shown: an enum's ``.value``
# is a property, read 13,000 times for one sort at 2,048 GPUs
_RANK_OF_STATE = {s: i for i, s in enumerate(BackendState)}
_NO_LATENCY_STATES = frozenset(s for s in BackendState if s.value in NO_LATENCY_NOW)
_TAKES_WORK_STATES = frozenset({BackendState.ACTIVE, BackendState.DRAINING})
# what the live sorts read, as C-level getters
_SLOT_OF, _BACKEND_OF = itemgetter(0), itemgetter(1)
_ACTIVITY = attrgetter("activity_pct")
_WEIGHT, _STATE, _INFLIGHT = attrgetter("weight"), attrgetter("state"), attrgetter("inflight")

__all__ = ["DEFAULT_SORT", "NAME_SORTS", "SORT_VALUE", "RowOrder", "SortValue", "search_text"]

# the orders that read only rows' names (they move when a name or an alert does)
NAME_SORTS = frozenset({DEFAULT_SORT, "host", "gpu", "slot", "profile", "backend"})


def gpu_target(slot_id: str) -> str:
    """How alerts name a slot's GPU (``host/gpuN``): a MIG slot's id less its instance."""
    head, _, tail = slot_id.rpartition("/")
    return head if head and tail.startswith("gi") else slot_id


def row_targets(key: RowKey) -> tuple[str, ...]:
    """The alert targets that name this row: its slot, its backend, its GPU."""
    slot_id, backend = key
    return (slot_id, backend, gpu_target(slot_id)) if backend else (slot_id, gpu_target(slot_id))


def _ratio(row: RowValues) -> float | None:
    if row.p95 is None or row.state in NO_LATENCY_NOW or not_serving(row):
        return None  # shown as absent (or n/a): sorts as absent
    return row.p95 / row.slo if row.slo else row.p95


def _not_serving(snap: Snapshot, b: Backend) -> bool:
    """``slot_cells.not_serving`` read off the snapshot (the row's ``ready`` is worked out so:
    the liveness verdict, else the registry's)."""
    if b.state not in _TAKES_WORK_STATES:
        return False
    lv = snap.liveness.get(b.name)
    return (b.ready if lv is None else lv.serving) is False


def _static(row: RowValues | RowNames) -> SortValue:
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
    # NOT READY and a stale rate show n/a, drained or down "—": absent
    "rps": lambda r: (
        None
        if r.state in NO_LATENCY_NOW or not_serving(r) or (r.stale and r.stale_age("rps"))
        else r.rps
    ),
}


# the last rows' live column values: (rows, column, values); worked out on the hub's thread
# for the table's column (``widgets.tick_prep``), found here when the UI thread asks
_live_memo: tuple[object, str, dict[RowKey, SortValue | None] | None] = (None, "", None)


def live_values(rows: Rows, sort_key: str) -> dict[RowKey, SortValue | None] | None:
    """``_live_values``, kept for the last rows and column asked (by any thread)."""
    global _live_memo
    memo = _live_memo
    if memo[0] is rows and memo[1] == sort_key:
        return memo[2]
    values = _live_values(rows, sort_key)
    _live_memo = (rows, sort_key, values)
    return values


def _live_values(rows: Rows, sort_key: str) -> dict[RowKey, SortValue | None] | None:
    """Every row's value of a live column read straight off the snapshot's entities (what
    the rows would show), so a sort by it does not work out every row; None for a column
    of names. Worked out per slot or backend, then handed to each row by its key.

    Built with ``map``/``zip`` where it can: the loops then run in C, which matters on the
    UI thread (a key's sort at 2,048 GPUs reads 13,700 rows)."""
    snap = rows.snapshot
    slots, backends, latency = snap.slots, snap.backends, snap.latency
    keys = list(rows)
    per: dict[str, SortValue | None]
    if sort_key in ("activity", "trend"):
        per = dict(zip(slots, map(_ACTIVITY, slots.values()), strict=True))
        return dict(zip(keys, map(per.get, map(_SLOT_OF, keys)), strict=True))
    if sort_key == "mem":
        per = {
            sid: None if s.mem_used_mib is None else (s.mem_used_mib, s.mem_total_mib or 0.0)
            for sid, s in slots.items()
        }
        return dict(zip(keys, map(per.get, map(_SLOT_OF, keys)), strict=True))
    if sort_key == "weight":
        per = dict(zip(backends, map(_WEIGHT, backends.values()), strict=True))
    elif sort_key == "state":
        states = map(_STATE, backends.values())
        per = dict(zip(backends, map(_RANK_OF_STATE.get, states), strict=True))
    elif sort_key == "inflight":
        per = dict(zip(backends, map(_INFLIGHT, backends.values()), strict=True))
    elif sort_key == "rps":
        fields = snap.staleness.fields  # a rate from a stale source shows n/a: absent
        per = {
            name: None
            if (lat := latency.get(name)) is None
            or b.state in _NO_LATENCY_STATES
            or _not_serving(snap, b)
            or (fields and "req_per_s" in fields.get(f"latency:{name}", ()))
            else lat.req_per_s
            for name, b in backends.items()
        }
    elif sort_key == "p95":
        slos, default, gone = snap.slo_p95_ms, rows.default_slo_ms, _NO_LATENCY_STATES
        # a drained or down backend's last p95 is shown as absent, a NOT READY one's n/a
        per = {
            name: None
            if (lat := latency.get(name)) is None
            or (p95 := lat.p95_ms) is None
            or b.state in gone
            or _not_serving(snap, b)
            else (p95 / slo if (slo := slos.get(name, default)) else p95)
            for name, b in backends.items()
        }
    else:
        return None
    # a row without a backend ("" or None) has no value: no backend is named "" here
    if "" in per:
        per = {name: v for name, v in per.items() if name}
    return dict(zip(keys, map(per.get, map(_BACKEND_OF, keys)), strict=True))


class RowOrder:
    """The filtered, sorted row keys; re-sorted only when needed."""

    def __init__(self, sort_key: str = DEFAULT_SORT, reverse: bool = False) -> None:
        self.rows: Mapping[RowKey, RowValues] = {}
        # the worst alert severity (1 warn, 2 crit, ...) on each row that has one
        self.problems: dict[RowKey, int] = {}
        self.keys: list[RowKey] = []
        self.sort_key = sort_key
        self.reverse = reverse
        self.filter = ""
        self.sorts = 0  # how many times the order was recomputed (tests, benchmarks)
        # the live column's values the order was sorted on (lazily built rows only)
        self._live: dict[RowKey, SortValue | None] | None = None
        # the rows' names, kept while no row came or went and no name moved
        self._index: NameIndex | None = None
        self._names_token: tuple[object, int] | None = None  # that of the rows last taken
        # the last order before filtering, and what it was worked out from
        self._unfiltered: tuple[tuple[object, ...], list[RowKey]] | None = None

    def update(
        self, rows: Mapping[RowKey, RowValues], problems: Mapping[RowKey, int] | None = None
    ) -> set[RowKey]:
        """Take this tick's rows (and which of them have alerts); return the keys whose values
        changed (or are new), where that was worked out: lazily built ``Rows`` in the default
        order are not read at all (their ``names_gen`` says whether to re-sort)."""
        old = self.rows
        self.rows = rows
        new_problems = dict(problems or {})
        problems_moved = new_problems != self.problems
        self.problems = new_problems
        lazy = rows if isinstance(rows, Rows) else None
        token = None if lazy is None else lazy.names_token
        names_moved = token is None or token != self._names_token
        self._names_token = token
        if names_moved or not same_keys(rows, old):
            self._index = None
        if not same_keys(rows, old) or (problems_moved and self.sort_key == DEFAULT_SORT):
            self.resort()
            return set(rows.keys() - old.keys())
        if lazy is not None and self.sort_key in NAME_SORTS:
            if names_moved:
                self.resort()
            return set()
        live = live_values(lazy, self.sort_key) if lazy is not None else None
        if live is not None and lazy is not None:
            # a live column: re-sorted only when a value crossed a neighbour's
            if (self.filter and names_moved) or not still_ordered(self.keys, live, self.reverse):
                self.resort(live)
            else:
                self._live = live
            return set()
        changed = {k for k, v in rows.items() if (was := old.get(k)) is not v and was != v}
        if changed:
            value = SORT_VALUE.get(self.sort_key, _static)
            names_of = self._names()
            if any(value(old[k]) != value(rows[k]) for k in changed) or (
                self.filter
                and any(search_text(old[k]) != search_text(names_of(k)) for k in changed)
            ):
                self.resort()
        return changed

    def _names(self) -> Callable[[RowKey], RowValues | RowNames]:
        """What the default order and the filter read of a row: its names where the rows
        know them without being built, else the row."""
        rows = self.rows
        return rows.name_of if isinstance(rows, Rows) else rows.__getitem__

    @property
    def index(self) -> NameIndex:
        """The rows' names, worked out once per set of names."""
        if self._index is None:
            self._index = NameIndex(self.rows, self._names())  # type: ignore[arg-type]
        return self._index

    def set_sort(self, sort_key: str, reverse: bool) -> None:
        self.sort_key, self.reverse = sort_key, reverse
        self.resort()

    def set_filter(self, text: str) -> None:
        self.filter = text.strip().lower()
        self.resort()

    def resort(self, live: dict[RowKey, SortValue | None] | None = None) -> None:
        """Filter and sort again (``live``: the sort column's values, when worked out)."""
        self.sorts += 1
        rows = self.rows
        if live is None and isinstance(rows, Rows) and self.sort_key != DEFAULT_SORT:
            live = live_values(rows, self.sort_key)
        self._live = live
        index = self.index
        # what the unfiltered order follows: a new filter text alone re-filters, never re-sorts
        basis = (index, self.sort_key, self.reverse, rows if live is None else live, self.problems)
        last = self._unfiltered
        if last is not None and _same_basis(last[0], basis):
            keys = last[1]
        else:
            keys = self._sorted(index, live)
            self._unfiltered = (basis, keys)
        if self.filter:
            matched = index.matching(self.filter)
            keys = [k for k in keys if k in matched]
        self.keys = list(keys)  # the index's lists stay its own

    def _sorted(
        self, index: NameIndex, live: dict[RowKey, SortValue | None] | None
    ) -> list[RowKey]:
        """Every row in this order, unfiltered."""
        if self.sort_key == DEFAULT_SORT:
            keys = index.default_order(self.problems)
            return keys[::-1] if self.reverse else keys
        if live is not None:
            return ordered(index.by_key, live, self.reverse)
        if self.sort_key in NAME_SORTS:
            value_of_names = SORT_VALUE[self.sort_key]
            return index.by_name(self.sort_key, value_of_names, self.reverse)  # type: ignore[arg-type]
        # a live column of rows given whole (tests, a replay's plain rows)
        value, get = SORT_VALUE[self.sort_key], self.rows.__getitem__
        return ordered(index.by_key, lambda k: value(get(k)), self.reverse)


def _same_basis(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """The same index, rows or values and problems (the same objects), column and direction."""
    index, key, reverse, values, problems = a
    return key == b[1] and reverse == b[2] and index is b[0] and values is b[3] and problems is b[4]


def problem_rows(
    rows: Mapping[RowKey, object], severity_by_target: Mapping[str, int]
) -> dict[RowKey, int]:
    """The rows an alert names (by slot, backend or GPU), each with its worst severity + 1
    (so that an INFO alert still counts as a problem: 1 info, 2 warn, 3 crit). Reads only the
    row keys."""
    if not severity_by_target:
        return {}
    found: dict[RowKey, int] = {}
    get = severity_by_target.get
    for key in rows:
        worst = max(get(t, -1) for t in row_targets(key))
        if worst >= 0:
            found[key] = worst + 1
    return found


def first_row_of(keys: Sequence[RowKey], target: str) -> RowKey | None:
    """The first row (in shown order) that ``target`` names: its backend, slot or GPU."""
    for pick in (lambda k: k[1] == target, lambda k: target in row_targets(k)):
        for key in keys:
            if pick(key):
                return key
    return None
