"""What each slot-table cell shows, and which style class marks it (hot, breach, stale, ...).

Pure: given a row's values and its sparkline, the text of every column and the name of its
style ("hot", "breach", "warn", "ok", "dim", "na", "stale" or ""), which the widget maps to
theme colours.

A stale value (its source's last good reading is older than two cadences, or its newest read
failed) is drawn in the "stale" style with its age beside it (``1840·45s``), never in the style
of a current value: no bar, no SLO colour. A rate from a stale source is not a rate now, so
REQ/S shows ``n/a·45s``. Cells too narrow for the age (WT, STATE) are only dimmed; the row's
INFL cell carries the registry's age. P95/SLO has one format for every row (``p95_cell``):
``14/2500``, stale ``1840/2500·45s``, ``n/a/2500`` when no p95 is current (none reported, or
NOT READY: REQ/S is ``n/a`` then too), ``—/2500`` drained or down (REQ/S ``—`` then: what
its window still counts is from before, not traffic now). A fresh "not ready" wins over a stale
registry state; a drained backend that is not ready shows ``drained ✗``.
"""

from __future__ import annotations

from gpucon.widgets import fmt
from gpucon.widgets.p95_cell import ABSENT, p95_text
from gpucon.widgets.safe_text import fit_end
from gpucon.widgets.slot_rows import HOT_PCT, LOW_FREE_MIB, RowValues

Cell = tuple[str, str]  # (text, style name)
STALE = "stale"
_STATE_STYLE = {"active": "ok", "draining": "warn", "drained": "dim", "down": "breach"}


def _aged(text: str, age: str, width: int) -> Cell:
    """A stale value's text with its age when both fit the cell, else the text alone."""
    suffix = f"·{age}"
    return (text + suffix if len(text) + len(suffix) <= width else text, STALE)


def _activity(row: RowValues, width: int) -> Cell:
    if row.activity is None:
        return (fmt.NA, "na")
    if row.stale and (age := row.stale_age("activity")) is not None:
        return _aged(f"{fmt.pct(row.activity):>4} ", age, width)  # no bar: not a reading now
    bar_width = max(0, width - 5)
    hot = row.activity >= HOT_PCT
    # "!" marks hot in words as well as in colour (a monochrome terminal, a colour-blind eye)
    text = f"{fmt.pct(row.activity):>4}{'!' if hot else ' '}{fmt.bar(row.activity, bar_width)}"
    return (text, "hot" if hot else "bar")


def _mem(row: RowValues, width: int) -> Cell:
    # the header names the unit (MEM GiB): the cells carry numbers only
    text = fmt.mem(row.mem_used, row.mem_total)
    if row.mem_used is None or row.mem_total is None:
        return (text, "na" if row.mem_used is None and row.mem_total is None else "")
    if row.stale and (age := row.stale_age("mem")) is not None:
        return _aged(fmt.gib(row.mem_used), age, width)
    if row.mem_total - row.mem_used < LOW_FREE_MIB:
        return ("!" + text, "breach")
    return (text, "")


_TAKES_WORK = frozenset({"active", "draining"})
# backends that take no requests: a p95 is shown as absent (ABSENT), never as a current one
NO_LATENCY_NOW = frozenset({"drained", "down"})


DEAD_MARK = "✗"  # a drained backend that is not ready either: a glyph, not colour alone


def _state(row: RowValues) -> Cell:
    """The registry state, unless the backend should take work and nothing says it can.

    ``row.ready`` is the liveness verdict, drawn only from fresh signals: a fresh "not ready"
    wins over a stale registry state (Redis down, its last ``active`` kept), whose staleness
    the WT and INFL cells still show."""
    if not row.state:
        return ("", "")
    if row.state in _TAKES_WORK and row.ready is False:
        return ("NOT READY", "breach")
    if row.state == "drained" and row.ready is False:
        # taken out on purpose, and dead as well: not the same as a healthy drained one
        return (f"drained {DEAD_MARK}", STALE if row.stale_age("state") else "warn")
    if row.stale and row.stale_age("state") is not None:
        return (row.state, STALE)
    if row.state == "active" and row.ready is None:
        return ("active?", "warn")
    return (row.state, _STATE_STYLE.get(row.state, ""))


def _p95(row: RowValues, width: int) -> Cell:
    """One format for every row (``p95_cell``): ms digits over the SLO, stale with its age."""
    if not row.backend:
        return ("", "")
    if row.state in NO_LATENCY_NOW:
        # it takes no requests: the p95 a latency source still reports is its last one, from
        # before it was drained or went down, and no measure of what users get now
        return (p95_text(ABSENT, row.slo, width), "dim")
    if not_serving(row):
        # readiness says it serves nothing: no latency now, from the first tick it says so
        return (p95_text(None, row.slo, width), "na")
    age = row.stale_age("p95") if row.stale else None
    if row.p95 is None:
        return (p95_text(None, row.slo, width, age=age), "na" if age is None else STALE)
    if age is not None:
        # the last p95 seen, with its age: not compared with the SLO (no glyph, no colour)
        return (p95_text(row.p95, row.slo, width, age=age), STALE)
    # the glyphs say it without colour: "!" over the SLO, "~" within 20 % of it
    if row.slo is not None and row.p95 > row.slo:
        return (p95_text(row.p95, row.slo, width, glyph="!"), "breach")
    if row.slo is not None and row.p95 > 0.8 * row.slo:
        return (p95_text(row.p95, row.slo, width, glyph="~"), "warn")
    return (p95_text(row.p95, row.slo, width), "")


def not_serving(row: RowValues) -> bool:
    """Should take requests (active, draining) and its readiness says it cannot: NOT READY."""
    return row.ready is False and row.state in _TAKES_WORK


def _rps(row: RowValues, width: int) -> Cell:
    if row.backend and row.state in NO_LATENCY_NOW:
        # it takes no requests: what the window still counts is from before it was drained or
        # went down, winding down, not traffic now (absent, as its P95/SLO)
        return (ABSENT, "dim")
    if row.backend and not_serving(row):
        # no rate now, stale source or not (as its P95/SLO): the window ends before it stopped
        return (fmt.NA, "na")
    if row.backend and row.stale and (age := row.stale_age("rps")) is not None:
        return _aged(fmt.NA, age, width)  # a rate from a stale source is no rate now
    return _number(row.rps, row.backend, 1)


def _inflight(row: RowValues, width: int) -> Cell:
    value = None if row.inflight is None else float(row.inflight)
    if row.backend and value is not None and row.stale:
        age = row.stale_age("inflight")
        if age is not None:
            return _aged(fmt.number(value, 0), age, width)
    return _number(value, row.backend, 0)


def _number(value: float | None, backend: str, digits: int) -> Cell:
    if not backend:
        return ("", "")
    return (fmt.number(value, digits), "na" if value is None else "")


def _weight(row: RowValues) -> Cell:
    value = row.weight
    if not row.backend:
        return ("", "")
    if value is None:
        return (fmt.NA, "na")
    text = f"{value:.2g}" if value < 10 else f"{value:.0f}"
    if row.stale and row.stale_age("weight") is not None:
        return (text, STALE)
    return (text, "dim" if value == 0 else "")


def cell(key: str, row: RowValues, width: int, spark: str) -> Cell:
    """The text and style name of column ``key`` for ``row`` at ``width`` cells."""
    if key == "host":
        return (row.host or fmt.NA, "" if row.host else "na")
    if key == "gpu":
        return (row.gpu, "dim")
    if key == "slot":
        return (fit_end(row.slot, width), "")
    if key == "gpu_slot":  # SLOT while the GPU column is dropped: "0/gi1", "0/whole"
        index = row.gpu.split(" ", 1)[0]
        if index and (row.slot.startswith("gi") or row.slot == "whole"):
            return (fit_end(f"{index}/{row.slot}", width), "")
        # a slot id cut short keeps its end: "…gpu0/gi1" tells rows apart, "lab/gpu0/…" not
        return (fit_end(row.slot, width), "")
    if key == "profile":
        return (row.profile or fmt.NA, "" if row.profile else "na")
    if key == "activity":
        return _activity(row, width)
    if key == "trend":
        if row.stale and row.stale_age("activity") is not None:
            return (spark, STALE)
        return (spark, "hot" if (row.activity or 0.0) >= HOT_PCT else "bar")
    if key == "mem":
        return _mem(row, width)
    if key == "backend":
        return (row.backend or "—", "" if row.backend else "dim")
    if key == "weight":
        return _weight(row)
    if key == "state":
        return _state(row)
    if key == "inflight":
        return _inflight(row, width)
    if key == "p95":
        return _p95(row, width)
    if key == "rps":
        return _rps(row, width)
    raise KeyError(key)
