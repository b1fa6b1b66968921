"""What each slot-table cell shows, and which style class marks it (hot, breach, stale, ...).

Pure: given a row's values and its sparkline, the text of every column and the name of its
style ("hot", "breach", "warn", "ok", "dim", "na" or ""), which the widget maps to theme colours.
"""

from __future__ import annotations

from gpucon.widgets import fmt
from gpucon.widgets.slot_rows import HOT_PCT, LOW_FREE_MIB, RowValues

Cell = tuple[str, str]  # (text, style name)
_STATE_STYLE = {"active": "ok", "draining": "warn", "drained": "dim", "down": "breach"}


def _activity(row: RowValues, width: int) -> Cell:
    if row.activity is None:
        return (fmt.NA, "na")
    bar_width = max(0, width - 5)
    text = f"{fmt.pct(row.activity):>4} {fmt.bar(row.activity, bar_width)}"
    return (text, "hot" if row.activity >= HOT_PCT else "bar")


def _mem(row: RowValues) -> Cell:
    text = fmt.mem(row.mem_used, row.mem_total)
    if row.mem_used is None or row.mem_total is None:
        return (text, "na" if row.mem_used is None and row.mem_total is None else "")
    return (text, "breach" if row.mem_total - row.mem_used < LOW_FREE_MIB else "")


_TAKES_WORK = frozenset({"active", "draining"})


def _state(row: RowValues) -> Cell:
    """The registry state, unless the backend should take work and nothing says it can."""
    if not row.state:
        return ("", "")
    if row.state in _TAKES_WORK and row.ready is False:
        return ("NOT READY", "breach")
    if row.state == "active" and row.ready is None:
        return ("active?", "warn")
    return (row.state, _STATE_STYLE.get(row.state, ""))


def _p95(row: RowValues) -> Cell:
    if not row.backend:
        return ("", "")
    if row.p95 is None:
        return (f"{fmt.NA}/{fmt.ms(row.slo)}", "na")
    text = f"{fmt.ms(row.p95)}/{fmt.ms(row.slo)}"
    if row.ready is False and row.state in _TAKES_WORK:
        return (text, "dim")  # from before it stopped: not what users get now
    if row.slo is not None and row.p95 > row.slo:
        return (text, "breach")
    if row.slo is not None and row.p95 > 0.8 * row.slo:
        return (text, "warn")
    return (text, "")


def _number(value: float | None, backend: str, digits: int) -> Cell:
    if not backend:
        return ("", "")
    return (fmt.number(value, digits), "na" if value is None else "")


def _weight(value: float | None, backend: str) -> Cell:
    if not backend:
        return ("", "")
    if value is None:
        return (fmt.NA, "na")
    return (f"{value:.2g}" if value < 10 else f"{value:.0f}", "dim" if value == 0 else "")


def cell(key: str, row: RowValues, width: int, spark: str) -> Cell:
    """The text and style name of column ``key`` for ``row`` at ``width`` cells."""
    if key == "host":
        return (row.host or fmt.NA, "" if row.host else "na")
    if key == "gpu":
        return (row.gpu, "dim")
    if key == "slot":
        return (row.slot, "")
    if key == "profile":
        return (row.profile or fmt.NA, "" if row.profile else "na")
    if key == "activity":
        return _activity(row, width)
    if key == "trend":
        return (spark, "hot" if (row.activity or 0.0) >= HOT_PCT else "bar")
    if key == "mem":
        return _mem(row)
    if key == "backend":
        return (row.backend or "—", "" if row.backend else "dim")
    if key == "weight":
        return _weight(row.weight, row.backend)
    if key == "state":
        return _state(row)
    if key == "inflight":
        return _number(None if row.inflight is None else float(row.inflight), row.backend, 0)
    if key == "p95":
        return _p95(row)
    if key == "rps":
        text, style = _number(row.rps, row.backend, 1)
        if row.rps is not None and row.ready is False and row.state in _TAKES_WORK:
            return (text, "dim")  # a rate over a window that ends before it stopped
        return (text, style)
    raise KeyError(key)
