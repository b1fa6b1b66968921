"""What each backend can sustain: a windowed estimate of its throughput within its p95 SLO.

Observed req/s is not capacity: the scheduler sends a backend work in proportion to its weight,
so weights made from req/s shares only echo themselves (and flip with every sample's noise).
The utilization law separates the two: a backend that served X req/s while its slot was busy
a fraction U of the time can serve about X / U at full activity, whatever its weight was.

``sustained_throughput`` applies it over the history window (``WINDOW_S``) to the samples in
which the backend served work with its p95 within its SLO and its slot at least
``MIN_ACTIVITY_PCT`` busy: the req/s served in them divided by the busy time, once there are
``MIN_SAMPLES`` of them. A ratio of sums weighs the busy samples most (batching makes a GPU
serve less per busy second at high load than a quiet sample suggests) and moves little
between two looks at an unchanged fleet. On a slot shared by several backends (MPS in a VM)
the slot's activity is split among them by the work each did (req/s × service time, sample by
sample); without the service times the slot cannot be split and the backend has no estimate.

``sm_share`` is the fallback: the slot's SMs (on a shared slot, the backend's MPS thread share
of them, or an equal part).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucon.actions.load import slo_for
from gpucon.model.fleet import Backend
from gpucon.model.snapshot import Snapshot

WINDOW_S = 120.0
MIN_SAMPLES = 20
MIN_ACTIVITY_PCT = 5.0


@dataclass(frozen=True, slots=True)
class Throughput:
    """A backend's sustained throughput (req/s at full activity) and the samples behind it."""

    req_per_s: float | None  # None: fewer than MIN_SAMPLES usable samples
    samples: int
    why_not: str = ""  # when req_per_s is None: why


def sustained_throughput(snapshot: Snapshot, backend: Backend) -> Throughput:
    """Req/s served ÷ (its share of) the slot's busy time, over the in-SLO samples."""
    history = snapshot.history
    slot = snapshot.slots.get(backend.slot_id or "")
    if slot is None:
        return Throughput(None, 0, "its slot is not known")
    times = history.times
    n = sum(1 for t in times if t >= snapshot.taken_at - WINDOW_S)
    activity = history.get(f"slot:{slot.id}:activity")
    rps = history.get(f"backend:{backend.name}:rps")
    p95 = history.get(f"backend:{backend.name}:p95")
    if not n or not activity or not rps or not p95:
        return Throughput(None, 0, "no history of its req/s, p95 and slot activity")
    mates = [b for b in snapshot.backends_on(slot.id) if b.name != backend.name]
    # a shared slot: its activity is split by the work each backend did (req/s × service time)
    sharing = [
        (history.get(f"backend:{b.name}:rps"), history.get(f"backend:{b.name}:service_ms"))
        for b in (backend, *mates)
    ]
    if mates and not all(r and t for r, t in sharing):
        return Throughput(None, 0, f"{slot.id} is shared and not every service time is known")
    slo = slo_for(snapshot, backend.name)
    served = busy = 0.0
    count = 0
    for i in range(-n, 0):
        r, p, a = rps[i], p95[i], activity[i]
        if r is None or p is None or a is None or r <= 0 or p > slo or a < MIN_ACTIVITY_PCT:
            continue
        share = 1.0
        if mates:
            work = [(rs[i], ts[i]) for rs, ts in sharing]
            if any(x is None or t is None for x, t in work):
                continue
            total = sum((x or 0.0) * (t or 0.0) for x, t in work)
            share = r * (work[0][1] or 0.0) / total if total > 0 else 1.0
            if share <= 0:
                continue
        served += r
        busy += a / 100.0 * share
        count += 1
    if count < MIN_SAMPLES:
        return Throughput(None, count, f"{count} of {MIN_SAMPLES} samples within SLO needed")
    return Throughput(served / busy, count)


def sm_share(snapshot: Snapshot, backend: Backend) -> float | None:
    """The SMs the backend computes on: its slot's, or its share of a shared slot's."""
    slot = snapshot.slots.get(backend.slot_id or "")
    if slot is None or not slot.sm_count:
        return None
    sharing = len(snapshot.backends_on(slot.id))
    if sharing <= 1:
        return float(slot.sm_count)
    mps = slot.vm.mps if slot.vm is not None else None
    pct = dict(mps.thread_pct_by_server).get(backend.name) if mps is not None else None
    if pct is not None and 0 < pct <= 100:
        return slot.sm_count * pct / 100.0
    return slot.sm_count / sharing
