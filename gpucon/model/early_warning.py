"""Early warning: alerts from trends in the history, before a limit is crossed.

- ``memory_trend``: a slot's memory that keeps growing is extrapolated to when it is full
  ("full in 4.8 min"): WARN below ``mem_full_warn_s``, CRIT below ``mem_full_crit_s``;
  once under ``min_free_mem_mib`` free, ``low_memory`` speaks instead.
- ``queue_growth`` (``model.queue_growth``): a stream's waiting count rising tick after tick,
  or steadily over the window ("queue growing +4.1/s for 3 ticks (3 s), 16 waiting, ...").
- ``p95_trend``: a backend's p95 above ``p95_near_slo_pct`` of its SLO and rising: above the
  window's first sample by ``p95_rise_pct`` of the SLO, and so is the least-squares line.

Each message says the trend it saw and over how long. Every rule first tests the newest
samples (``History.last``/``back``, O(1)), and fits a line only on the few series that pass,
so a tick at fleet size costs one or two dict lookups per series.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from gpucon.model.alert_base import (
    AlertInputs,
    AlertThresholds,
    Found,
    Severity,
    fmt,
    fmt_duration,
    p95_near_or_over,
)
from gpucon.model.cotenants import foreign_memory_mib, foreign_processes
from gpucon.model.fleet import BackendState, Slot
from gpucon.model.growth_runs import GrowthRuns
from gpucon.model.history import History, Sample
from gpucon.model.queue_growth import queue_growth
from gpucon.model.trends import known_points, slope, ticks_within


def _newest_run(
    history: History, key: str, times: tuple[float, ...], ticks: int
) -> tuple[list[float], list[float]]:
    """The (times, values) of ``key``'s newest run of known samples without a drop, within the
    newest ``ticks`` ticks (``times``: theirs), oldest first, from one sample before its first
    rise (equal samples before it skipped): found newest first, a sample at a
    time and stopped at the first drop (when every value moves each tick, most slots' memory
    fell within the last few samples: the window is neither copied nor scanned)."""
    ts: list[float] = []
    vs: list[float] = []
    newer: Sample = None
    j = -1
    for v in history.newest_first(key, min(ticks, len(times))):
        j += 1
        if v is None:
            continue  # a gap: dropped, as known_points drops it
        if newer is not None and v > newer:
            break  # a drop ends the run
        ts.append(times[-1 - j])
        vs.append(v)
        newer = v
    ts.reverse()
    vs.reverse()
    start = 0
    while start < len(vs) - 1 and vs[start + 1] == vs[start]:
        start += 1
    return ts[start:], vs[start:]


_MEM_KEYS: dict[str, str] = {}
_MEM_KEYS_MAX = 1 << 16


def _mem_key(slot_id: str) -> str:
    """The slot's memory series key, kept from tick to tick: a string made once hashes once."""
    key = _MEM_KEYS.get(slot_id)
    if key is None:
        if len(_MEM_KEYS) >= _MEM_KEYS_MAX:  # slots come and go: never grow without bound
            _MEM_KEYS.clear()
        key = _MEM_KEYS[slot_id] = f"slot:{slot_id}:mem_used"
    return key


def memory_trend(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    times = i.history.times
    n = ticks_within(times, i.now, t.mem_trend_window_s)
    if n < t.mem_trend_rises + 1:
        return
    window_times = times[len(times) - n :]
    runs = i.mem_runs
    count = i.history.appended
    # the book keeps a run's sums while a window of its horizon may hold the run: the window
    # must be no longer (the hub's book and history have the same capacity)
    if (
        runs is not None
        and runs.tick == count - 1
        and runs.first_tick <= count - n
        and n <= runs.horizon
    ):
        yield from _memory_trend_runs(i, t, runs, window_times, n)
        return
    # most slots: flat over the window (or unknown), decided without reading it
    keys = {_mem_key(sid): sid for sid in i.slots}
    for key in i.history.rose(keys, n - 1):
        slot = i.slots[keys[key]]
        newest = i.history.last(key)
        found = _memory_alert(i, t, slot, key, newest, window_times, n)
        if found is not None:
            yield found


# a run's slope from its running sums may differ from the fit in the last digits: a slot is
# let off without the fit only when its horizon is this much beyond the warning's
_SUMS_MARGIN = 1e-4


def _memory_trend_runs(
    i: AlertInputs, t: AlertThresholds, runs: GrowthRuns, window_times: tuple[float, ...], n: int
) -> Iterable[Found]:
    """``memory_trend`` over the hub's growth runs: only the slots that rose often enough in
    the window are looked at, and only those that may alert are fitted (``_memory_alert``)."""
    history = i.history
    clip = history.appended - n  # the window's first tick
    least = t.min_free_mem_mib
    # no series rose steeply enough in the window for any slot with ``least`` free to fill
    # within the warning's horizon (the fit's slope is at most the steepest rise): nothing to
    # look at (with every slot's memory creeping up each tick, every run passed the tests below)
    if runs.rise_bound(clip) * t.mem_full_warn_s * (1 + _SUMS_MARGIN) < least:
        return
    now_t = window_times[-1]
    still = t.mem_trend_window_s / 4
    warn = t.mem_full_warn_s * (1 + _SUMS_MARGIN)
    slots = i.slots
    min_rises = t.mem_trend_rises
    ids, last, gapped, by_pos = runs.ids, runs.last, runs.gapped, runs.runs
    times = runs.ring_times
    size = len(times)
    # the runs looked at in one loop, in the order of ``ids``: with every slot's memory
    # moving each tick every slot comes here, so the loop makes no call it can avoid (the
    # rises in the window by bisection, ``max`` and ``Run.rate`` written out). Those that rose
    # too seldom in the window or stopped growing (no rise in the last quarter of the window)
    # are left out.
    for pos in sorted(by_pos):
        run = by_pos[pos]
        preds = run.preds
        if (
            len(preds) < min_rises
            or pos in gapped
            or now_t - times[run.last_rise % size] > still
            or len(preds) - bisect_left(preds, clip) < min_rises
        ):
            continue
        sid = ids[pos]
        newest = last[pos]
        slot = slots.get(sid)
        total = None if slot is None else slot.mem_total_mib
        if slot is None or total is None:
            continue
        free = total - newest
        if not free > 0.0:
            free = 0.0
        if free < least:
            continue
        if run.begin >= clip:  # the run lies in the window: its sums are the fit's points
            count, st = run.n, run.st
            sxx = run.stt - st * st / count
            if count >= 2 and sxx > 0.0:
                rate = (run.stv - st * run.sv / count) / sxx
                if rate > 0.0 and free / rate >= warn:
                    continue
        key = _mem_key(sid)
        first = history.back(key, n - 1)
        if first is None or not newest > first:
            continue  # not risen across the window
        found = _memory_alert(i, t, slot, key, newest, window_times, n)
        if found is not None:
            yield found


def _memory_alert(
    i: AlertInputs,
    t: AlertThresholds,
    slot: Slot,
    key: str,
    newest: Sample,
    window_times: tuple[float, ...],
    n: int,
) -> Found | None:
    """The memory trend alert of one slot whose memory rose across the window, if any."""
    total = slot.mem_total_mib
    if total is None or newest is None:
        return None
    # the fit runs from where the newest growth began
    ts, vs = _newest_run(i.history, key, window_times, n)
    steps = [k for k in range(1, len(vs)) if vs[k] > vs[k - 1]]
    if len(steps) < t.mem_trend_rises:
        return None
    # still growing: it rose within the last quarter of the window (a process that took
    # its memory and stopped is not a leak; the fit would keep a stale slope)
    if ts[-1] - ts[steps[-1]] > t.mem_trend_window_s / 4:
        return None
    rate = slope(ts, vs)
    if rate is None or rate <= 0.0:
        return None
    free = max(0.0, total - newest)
    if free < t.min_free_mem_mib:
        return None  # low_memory says it now; a countdown of seconds adds nothing
    horizon = free / rate
    if horizon >= t.mem_full_warn_s:
        return None
    severity = Severity.CRITICAL if horizon < t.mem_full_crit_s else Severity.WARNING
    span = ts[-1] - ts[0]
    return (
        "memory_trend",
        slot.id,
        severity,
        f"memory full in {fmt_duration(horizon)}: +{fmt(rate, ' MiB/s')} over "
        f"{span:.0f}s, {free / 1024:.2f} GiB free of {total / 1024:.1f}"
        f"{_co_tenant_note(i, slot)}",
    )


def _co_tenant_note(i: AlertInputs, slot: Slot) -> str:
    """Who else holds memory on the slot, when a co-tenant does (it may be the one growing)."""
    if i.history.last(f"slot:{slot.id}:cotenant_mem") is None:
        return ""
    serving = sum(1 for b in i.backends.values() if b.slot_id == slot.id)
    foreign = foreign_processes(slot.processes, serving)
    if not foreign:
        return ""
    held = foreign_memory_mib(foreign) / 1024
    return f"; co-tenant {foreign[0].name or '?'} (pid {foreign[0].pid}) holds {held:.1f} GiB"


_NOT_TAKING_WORK = frozenset({BackendState.DRAINING, BackendState.DRAINED, BackendState.DOWN})


def p95_trend(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    times = i.history.times
    n = ticks_within(times, i.now, t.p95_trend_window_s)
    if n < 3:
        return
    window_times = times[len(times) - n :]
    near = t.p95_near_slo_pct / 100.0
    # near its SLO, not over it (over it: the p95_slo alert says so): few are
    close = [
        (name, p95, slo)
        for name, _, p95, slo in p95_near_or_over(i, near, t.default_slo_p95_ms)
        if near * slo <= p95 <= slo
    ]
    first_of = i.history.family_back("backend", "p95", n - 1)
    for name, p95, slo in close:
        rise_ms = slo * t.p95_rise_pct / 100.0
        key = f"backend:{name}:p95"
        first = i.history.back(key, n - 1) if first_of is None else first_of(name)
        # rising: above the window's first sample by the rise asked for (then the fit agrees)
        if first is None or p95 - first < rise_ms:
            continue
        b = i.backends.get(name)
        if b is not None and b.state in _NOT_TAKING_WORK:
            continue
        lv = i.liveness.get(name)
        if lv is not None and lv.serving is False:
            continue
        ts, vs = known_points(window_times, i.history.tail(key, n))
        rate = slope(ts, vs)
        if rate is None or len(ts) < 3 or rate * (ts[-1] - ts[0]) < rise_ms:
            continue
        at_slo = (slo - p95) / rate
        yield (
            "p95_trend",
            name,
            Severity.WARNING,
            # in ms, as the table's P95/SLO and the p95_slo alert beside it say it
            f"p95 {fmt(p95, ' ms')} is {100 * p95 / slo:.0f}% of SLO {fmt(slo, ' ms')}, "
            f"rising {fmt(rate, ' ms/s')} over {ts[-1] - ts[0]:.0f}s "
            f"(at SLO in ~{fmt_duration(at_slo)})",
        )


RULES = (memory_trend, queue_growth, p95_trend)

__all__ = ["RULES", "memory_trend", "p95_trend", "queue_growth"]
