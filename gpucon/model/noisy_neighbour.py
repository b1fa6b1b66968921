"""The noisy-neighbour hint: a backend's p95 rising together with a co-tenant on its slot.

A co-tenant is a process on the slot that no backend accounts for (``model.cotenants``: a
training job in the VM, another MPS client, a notebook on the slice). The hub samples what
memory the co-tenants hold (``slot:ID:cotenant_mem``, only while there are some); this rule
correlates that series with the p95 of each backend on the slot over ``noisy_window_s`` (a
tick where the slot's memory was read and no co-tenant was sampled counts as 0: nobody
there). When Pearson r reaches ``noisy_min_r`` and the p95 rose by ``noisy_rise_pct`` or more,
the alert names the co-tenant, the backend and the r it measured. Once raised it holds while
the co-tenant stays (a co-tenant that stays put has a flat series, and r says nothing more).

Only slots whose newest sample shows a co-tenant are looked at; a calm fleet costs one dict
lookup per slot.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpucon.model.alert_base import AlertInputs, AlertThresholds, Found, Severity, fmt_ms
from gpucon.model.columns import crowded, slot_ids
from gpucon.model.cotenants import foreign_processes
from gpucon.model.fleet import ComputeProcess, Slot
from gpucon.model.history import Sample
from gpucon.model.trends import pearson, ticks_within

MIN_PAIRS = 5


def _co_series(co: tuple[Sample, ...], mem: tuple[Sample, ...]) -> list[float | None]:
    """The co-tenants' memory per tick: 0 where the slot was read and none was sampled."""
    n = min(len(co), len(mem))
    co, mem = co[len(co) - n :], mem[len(mem) - n :]
    return [
        c if c is not None else (0.0 if m is not None else None)
        for c, m in zip(co, mem, strict=True)
    ]


def correlate(
    co: list[float | None], p95: tuple[Sample, ...], min_rise_pct: float
) -> tuple[float, float, float] | None:
    """(r, p95 before, p95 now) when the p95 rose by ``min_rise_pct`` with the co-tenant's
    memory; None when too few pairs, no rise, or a flat series."""
    n = min(len(co), len(p95))
    pairs = [
        (c, p)
        for c, p in zip(co[len(co) - n :], p95[len(p95) - n :], strict=True)
        if c is not None and p is not None
    ]
    if len(pairs) < MIN_PAIRS:
        return None
    xs = [c for c, _ in pairs]
    ys = [p for _, p in pairs]
    r = pearson(xs, ys)
    if r is None:
        return None
    # "before": the p95 while the co-tenant held the least; "now": the newest
    low = min(xs)
    before = sum(p for c, p in pairs if c == low) / sum(1 for c, _ in pairs if c == low)
    now = ys[-1]
    if before <= 0.0 or (now - before) / before * 100.0 < min_rise_pct:
        return None
    return r, before, now


def _name(processes: tuple[ComputeProcess, ...]) -> str:
    p = max(processes, key=lambda p: p.used_memory_mib or 0.0)
    mem = "" if p.used_memory_mib is None else f", {p.used_memory_mib / 1024:.1f} GiB"
    more = f" and {len(processes) - 1} more" if len(processes) > 1 else ""
    return f"{p.name or '?'} (pid {p.pid}{mem}){more}"


def noisy_neighbour(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    # a co-tenant makes at least two processes: most slots are decided by that, in the one
    # pass the co-tenant samples made of this tick's slots (``model.columns``)
    noisy: list[Slot] = [
        slot
        for slot in crowded(i.slots)
        if i.history.last(f"slot:{slot.id}:cotenant_mem") is not None
    ]
    if not noisy:
        return
    on_slot: dict[str | None, list[str]] = {s.id: [] for s in noisy}
    # the backends' slot ids as the tick's other readers have them (``model.columns``)
    for name, sid in zip(i.backends, slot_ids(i.backends), strict=True):
        if sid in on_slot:
            on_slot[sid].append(name)
    times = i.history.times
    n = ticks_within(times, i.now, t.noisy_window_s)
    span = times[-1] - times[len(times) - n] if n else 0.0
    for slot in noisy:
        names = sorted(on_slot[slot.id])
        foreign = foreign_processes(slot.processes, len(names))
        if not foreign:
            continue
        co = _co_series(
            i.history.tail(f"slot:{slot.id}:cotenant_mem", n),
            i.history.tail(f"slot:{slot.id}:mem_used", n),
        )
        best: tuple[float, float, float, str] | None = None
        for name in names:
            found = correlate(co, i.history.tail(f"backend:{name}:p95", n), t.noisy_rise_pct)
            if (
                found is not None
                and found[0] >= t.noisy_min_r
                and (best is None or found[0] > best[0])
            ):
                best = (*found, name)
        if best is None:
            before_now = i.previous.get(f"noisy_neighbour:{slot.id}")
            if before_now is not None:
                yield ("noisy_neighbour", slot.id, before_now.severity, before_now.message)
            continue
        r, before, now, name = best
        yield (
            "noisy_neighbour",
            slot.id,
            Severity.WARNING,
            f"co-tenant {_name(foreign)}: p95 of {name} rose "
            f"{fmt_ms(before)} → {fmt_ms(now)} with its memory, "
            f"r = {r:.2f} over {span:.0f}s",
        )


RULES = (noisy_neighbour,)
