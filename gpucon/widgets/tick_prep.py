"""What the fleet screen reads of each snapshot, worked out before the UI thread shows it.

Pure (no Textual). The hub hands each snapshot to the app from its own thread; there,
``TickPrep.prepare`` works out what showing it costs in proportion to the fleet: the table's
row keys and names (``RowBuilder.build``), the rows the alerts name, the sort column's values
when it is a live one, the alert counts, the GPUs worst first and the slot count. Each is kept
under the snapshot (or mapping) it came from, so the UI thread, showing that snapshot, finds it
ready and only applies it: its share of a tick is the screenful of rows and cells that
changed. A snapshot nothing prepared (tests, a pause's resume, a replay) is worked out on the
UI thread by the same functions, with the same result.

Threads: ``prepare`` runs on the hub's thread while the UI thread may be working out rows of
the snapshot before (``Rows`` reads the builder's caches, which check every entry against the
objects it was built from); builds are serialised by a lock, and each memo is one tuple
replaced whole.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from operator import attrgetter

from gpucon.model.alerts import Alert, Severity
from gpucon.model.columns import slot_ids
from gpucon.model.fleet import Backend, Gpu, Slot
from gpucon.model.ids import known_slot_count
from gpucon.model.snapshot import Snapshot
from gpucon.widgets.health_text import gpu_trouble
from gpucon.widgets.row_builder import RowBuilder, Rows, same_keys
from gpucon.widgets.row_order import NAME_SORTS, RowOrder, live_values, problem_rows
from gpucon.widgets.slot_rows import RowKey

_HOST_INDEX = attrgetter("host", "index")
_counts: tuple[object, tuple[int, int]] = (None, (0, 0))
_gpus: tuple[object, list[Gpu]] = (None, [])
_slot_count: tuple[object, object, int] = (None, None, 0)


def _go_on() -> None:
    """``give_way`` when nothing waits for a key."""


def alert_counts(alerts: tuple[Alert, ...]) -> tuple[int, int]:
    """How many alerts are critical and how many warnings (kept for the last alerts)."""
    global _counts
    memo = _counts
    if memo[0] is alerts:
        return memo[1]
    crit = warn = 0
    for a in alerts:
        if a.severity is Severity.CRITICAL:
            crit += 1
        elif a.severity is Severity.WARNING:
            warn += 1
    _counts = (alerts, (crit, warn))
    return crit, warn


def gpus_worst_first(gpus: Mapping[str, Gpu]) -> list[Gpu]:
    """Every GPU, the most troubled first, then by host and index (kept for the last GPUs)."""
    global _gpus
    memo = _gpus
    if memo[0] is gpus:
        return memo[1]
    # by host and index (a key read in C), then, only when some GPU is in trouble, worst
    # first: sorts are stable, so this is the order of (-trouble, host, index)
    ordered = sorted(gpus.values(), key=_HOST_INDEX)
    troubles = [gpu_trouble(g) for g in ordered]  # each GPU's worked out once
    if any(troubles):
        ranked = sorted(zip([-t for t in troubles], range(len(ordered)), ordered, strict=True))
        ordered = [g for _, _, g in ranked]
    _gpus = (gpus, ordered)
    return ordered


def slot_count(slots: Mapping[str, Slot], backends: Mapping[str, Backend]) -> int:
    """``known_slot_count`` of these slots and backends (kept for the last ones)."""
    global _slot_count
    memo = _slot_count
    if memo[0] is slots and memo[1] is backends:
        return memo[2]
    count = known_slot_count(slots, slot_ids(backends))
    _slot_count = (slots, backends, count)
    return count


class TickPrep:
    """The fleet table's rows and problem rows for the newest snapshots, built once each."""

    def __init__(self, builder: RowBuilder) -> None:
        self.builder = builder
        # the table's order: the column it sorts by now is read from it (its values are
        # worked out ahead when it is a live one)
        self.order: RowOrder | None = None
        self._lock = threading.Lock()
        self._rows: tuple[Snapshot | None, Rows | None] = (None, None)
        # (alerts, the worst severity by target, rows, the rows they name)
        self._problems: tuple[object, dict[str, int], Rows | None, dict[RowKey, int]]
        self._problems = (None, {}, None, {})
        # the screen is paused: it shows nothing of the next snapshots, so nothing is prepared
        self.held = False
        self.prepared = 0  # snapshots worked out ahead (tests and benchmarks read it)
        # rows built, by the name of the thread that built them (tests read it)
        self.builds: Counter[str] = Counter()

    def rows(self, snapshot: Snapshot) -> Rows:
        """The snapshot's rows (built once, on whichever thread asks first)."""
        with self._lock:
            done, rows = self._rows
            if done is snapshot and rows is not None:
                return rows
            rows = self.builder.build(snapshot)
            self._rows = (snapshot, rows)
            self.builds[threading.current_thread().name] += 1
            return rows

    def problems(self, snapshot: Snapshot, rows: Rows) -> dict[RowKey, int]:
        """The rows a warning or critical alert names; worked out again only when the
        alerts' targets and severities or the set of rows changed."""
        alerts, was_worst, was_rows, found = self._problems
        if alerts is snapshot.alerts and was_rows is rows:
            return found
        worst: dict[str, int] = {}
        for a in snapshot.alerts:
            if a.severity >= Severity.WARNING and worst.get(a.target, -1) < a.severity:
                worst[a.target] = int(a.severity)
        if worst != was_worst or not same_keys(rows, was_rows):
            found = problem_rows(rows, worst)
        self._problems = (snapshot.alerts, worst, rows, found)
        return found

    def prepare(self, snapshot: Snapshot, give_way: Callable[[], object] = _go_on) -> None:
        """Work out ahead, on the calling (hub's) thread, what showing ``snapshot`` reads;
        ``give_way`` is called before each step (the hub's ``ui_gate``: it waits while the
        UI answers a key, so that the key has the interpreter to itself)."""
        if self.held:
            return
        give_way()
        rows = self.rows(snapshot)
        give_way()
        self.problems(snapshot, rows)
        order = self.order
        sort_key = order.sort_key if order is not None else ""
        if sort_key and sort_key not in NAME_SORTS:
            give_way()
            live_values(rows, sort_key)
        alert_counts(snapshot.alerts)
        give_way()
        gpus_worst_first(snapshot.gpus)
        slot_count(snapshot.slots, snapshot.backends)
        self.prepared += 1
