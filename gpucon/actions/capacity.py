"""What each backend can sustain within its p95 SLO: a windowed estimate from the history.

Observed req/s is not capacity: the scheduler sends a backend work in proportion to its weight,
so weights made from req/s shares only echo themselves (and flip with every sample's noise).
The utilization law separates the two: a backend that served X req/s while its slot was busy
a fraction U of the time sustains about X / U req/s at full activity, whatever its weight was.

The scheduler (the registry contract) sends each request to the backend with the lowest
in-flight/weight, so a weight is a share of the requests in flight, not of the req/s. What a
backend sustains in flight is its throughput times its service time (Little's law): a weight
in proportion to req/s alone over-loads backends whose requests are short (the simulator at
1.7× load after eight applies, mean of four seeds: weights by req/s ran the hottest slot at
92 % and the worst p95 at 0.83× its SLO; weights by requests in flight 65 % and 0.78×, equal
weights 78 % and 0.78×). ``Capacity.in_flight`` is the weight's unit; the req/s and service
time are shown with it.

``sustained`` takes, over the history window (``WINDOW_S``), the samples in which the backend
served work with its p95 within its SLO, its service time known and its slot at least
``MIN_ACTIVITY_PCT`` busy, and divides what they served by the busy time they took, once there
are ``MIN_SAMPLES`` of them. A ratio of sums weighs the busy samples most (batching makes a
GPU serve less per busy second at high load than a quiet sample suggests) and moves little
between two looks at an unchanged fleet. On a slot shared by several backends (MPS in a VM)
the slot's activity is split among them by the work each did (req/s × service time, sample by
sample); without every one's service time the slot cannot be split.

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
class Capacity:
    """What a backend sustains at full activity within its SLO, and the samples behind it."""

    in_flight: float | None  # requests in flight; None: fewer than MIN_SAMPLES usable samples
    req_per_s: float | None = None
    service_s: float | None = None  # mean service time over those samples
    samples: int = 0
    why_not: str = ""  # when in_flight is None: why

    def describe(self) -> str:
        """``"sustains 1.8 req/s × 1.7 s = 3.0 in flight within SLO over 60 samples"``."""
        return (
            f"sustains {self.req_per_s or 0.0:.3g} req/s × {self.service_s or 0.0:.3g} s = "
            f"{self.in_flight or 0.0:.3g} in flight within SLO over {self.samples} samples"
        )


def sustained(snapshot: Snapshot, backend: Backend) -> Capacity:
    """Work served ÷ (its share of) the slot's busy time, over the usable in-SLO samples."""
    history = snapshot.history
    slot = snapshot.slots.get(backend.slot_id or "")
    if slot is None:
        # the registry may well name it (the lab does): no GPU source reports its activity
        why = (
            f"no GPU source (NVML, DCGM) reports its slot {backend.slot_id}, so neither its "
            "activity nor its SM count is known"
            if backend.slot_id
            else "the registry names no slot for it"
        )
        return Capacity(None, why_not=why)
    n = sum(1 for t in history.times if t >= snapshot.taken_at - WINDOW_S)
    activity = history.get(f"slot:{slot.id}:activity")
    p95 = history.get(f"backend:{backend.name}:p95")
    # (req/s, service ms) series of the backend first, then of those sharing its slot
    work = [
        (history.get(f"backend:{b.name}:rps"), history.get(f"backend:{b.name}:service_ms"))
        for b in (backend, *(b for b in snapshot.backends_on(slot.id) if b.name != backend.name))
    ]
    if not n or not activity or not p95 or not all(r and s for r, s in work):
        return Capacity(None, why_not="no history of its req/s, service time, p95 or slot activity")
    slo = slo_for(snapshot, backend.name)
    served = done = busy = 0.0
    count = 0
    for i in range(-n, 0):
        p, a = p95[i], activity[i]
        if p is None or a is None or p > slo or a < MIN_ACTIVITY_PCT:
            continue
        sample = [(r[i], s[i]) for r, s in work]
        r, s = sample[0]
        if r is None or s is None or r <= 0 or any(x is None or y is None for x, y in sample):
            continue
        seconds = r * s / 1000.0  # busy-seconds per second: the requests it had in flight
        total = sum((x or 0.0) * (y or 0.0) / 1000.0 for x, y in sample)
        share = seconds / total if total > 0 else 1.0
        served += r
        done += seconds
        busy += a / 100.0 * share
        count += 1
    if count < MIN_SAMPLES or busy <= 0:
        return Capacity(
            None, samples=count, why_not=f"{count} of {MIN_SAMPLES} samples within SLO needed"
        )
    return Capacity(done / busy, served / busy, done / served, count)


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


def why_no_capacity(snapshot: Snapshot, backend: Backend, measured: Capacity) -> str:
    """Why neither ``sustained`` nor ``sm_share`` gives the backend a capacity: the slot no
    GPU source reports (``measured`` says it), a slot whose SM count is not reported (NVML
    reads it; DCGM's metrics do not carry it), or an SM count with no peer measured per SM."""
    slot = snapshot.slots.get(backend.slot_id or "")
    if slot is None:
        return measured.why_not
    if not slot.sm_count:
        sms = f"slot {slot.id} reports no SM count (NVML reads it; DCGM's metrics do not carry it)"
    else:
        share = sm_share(snapshot, backend) or 0.0
        sms = f"its {share:g} SMs cannot be scaled: no measured peer has an SM count"
    return f"{measured.why_not}; {sms}"
