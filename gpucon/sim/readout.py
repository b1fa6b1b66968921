"""Reads the simulated fleet's state out as a ``Reading`` (source ``"sim"``).

Values are rounded to what the console shows. The engine marks the entities whose shown values
changed; only those get a new frozen object, the rest keep theirs (building thousands of frozen
dataclasses would be most of a read-out's cost at 512 GPUs, and unchanged identity also lets
the UI skip the row).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpucon.model.fleet import (
    Backend,
    Gpu,
    Health,
    LatencyStats,
    QueueStats,
    Slot,
)
from gpucon.model.liveness import ReadyCheck
from gpucon.model.reading import Reading
from gpucon.sim.engine import SimWorld
from gpucon.sim.metrics import STATS_TAU_S
from gpucon.sim.parts import SimBackend, SimGpu, SimSlot

SOURCE_NAME = "sim"
STREAM = "gen:queue"
GROUP = "g1"
SCHEDULER_CONSUMERS = 2
SLOWDOWN_C = 87


def _gpu(g: SimGpu) -> Gpu:
    key = (
        round(g.util_pct),
        round(g.mem_used_mib),
        round(g.temperature_c),
        round(g.power_w),
        g.xid_at,
    )
    if g.cached is not None and key == g.cached_key:
        return g.cached
    t = g.gpu_type
    g.cached_key = key
    # the first ten fields by position: a call with more than 15 keyword arguments builds a
    # dict of them first (CPython's compiler), about 1.5 µs a record instead of 0.3
    g.cached = Gpu(
        g.uuid,
        g.host,
        g.index,
        t.name,
        float(round(g.util_pct)),
        float(round(g.mem_used_mib)),
        float(t.memory_mib),
        float(round(g.temperature_c)),
        float(round(g.power_w)),
        t.power_limit_w,
        mig_enabled=g.mig_enabled if t.profiles is not None else None,
        sm_count=t.sm_count,
        mig_profiles=t.profiles,
        # a simulated GPU raises no XID (watched: "none", not "n/a"); its clocks are held
        # down the way a real one's are: by the power cap at its limit, by heat near 87 °C
        xid_watched=True,
        xid_last=None if g.xid is None else g.xid[0],
        xid_at=g.xid_at,
        thermal_slowdown=round(g.temperature_c) >= SLOWDOWN_C,
        power_capped=t.power_limit_w is not None and round(g.power_w) >= 0.98 * t.power_limit_w,
    )
    return g.cached


def _slot(s: SimSlot) -> Slot:
    shown = s.shown
    if s.cached is not None and shown is s.cached_key:
        return s.cached
    if shown is None:  # not stepped yet
        shown = s.shown = (round(s.activity_pct), round(s.mem_used_mib), s.processes)
    g = s.gpu
    s.cached_key = shown
    # id and kind by position: 16 keyword arguments would be passed through a dict (``_gpu``)
    s.cached = Slot(
        s.id,
        s.kind,
        host=g.host,
        gpu_uuid=g.uuid,
        gpu_index=g.index,
        gpu_name=g.gpu_type.name,
        profile=s.profile,
        gi_id=s.gi_id,
        ci_id=s.ci_id,
        sm_count=s.sm_count,
        mem_used_mib=float(shown[1]),
        mem_total_mib=s.mem_total_mib,
        activity_pct=float(shown[0]),
        activity_metric=s.activity_metric,
        vm=s.vm,
        processes=s.processes,
    )
    return s.cached


def read_backend(b: SimBackend) -> Backend:
    """The registry's view of a backend (rebuilt only when a registry field changed)."""
    c = b.cached
    # compared with the record itself, the count first: the engine marks a backend when its
    # count moved, so most backends read here differ there (no tuple of fields built for them)
    if (
        c is not None
        and c.inflight == b.inflight
        and c.weight == b.weight
        and c.state is b.state
        and c.ready == b.ready
        and c.owner == b.owner
        and c.reason == b.reason
    ):
        return c
    # by position, in the order ``Backend`` declares its fields (no ready_at: the registry's
    # own readiness verdict is the simulator's ``ready_checks``)
    c = b.cached = Backend(
        b.name,
        b.slot.id,
        b.url,
        b.model.name,
        b.weight,
        b.state,
        b.inflight,
        b.ready,
        None,
        b.owner,
        b.reason,
    )
    return c


def _ready_check(b: SimBackend, last: ReadyCheck | None) -> ReadyCheck:
    """The simulated backend's answer to /v2/health/ready (the same object while unchanged)."""
    ready = b.ready and not b.fails_health
    error = None if ready else "refused"
    if last is not None and last.ready == ready and last.error == error:
        return last
    return ReadyCheck(b.name, ready, error)


def _latency(b: SimBackend) -> LatencyStats:
    shown = b.shown
    if b.latency is not None and shown is b.latency_key:
        return b.latency
    b.latency_key = shown
    if len(shown) < 8:  # no requests finished lately: a rate of 0, no quantiles
        b.latency = LatencyStats(key=b.name, req_per_s=0.0, rate_window_s=STATS_TAU_S)
        return b.latency
    rate, p50, p95, p99, err, queue_ms, compute_ms, avg_ms = shown
    b.latency = LatencyStats(
        key=b.name,
        rate_window_s=STATS_TAU_S,
        req_per_s=rate,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        error_rate=err,
        errors_by_reason=(("oom" if b.ready else "unavailable", err),) if err > 0 else (),
        queue_ms=queue_ms,
        compute_ms=compute_ms,
        avg_ms=avg_ms,
    )
    return b.latency


def stream_stats(world: SimWorld, now: float) -> QueueStats:
    """``gen:queue`` and its group ``g1`` as XINFO would show them."""
    waiting = sum(p.waiting for p in world.pools)
    pending = sum([b.inflight for b in world.backends])
    lag = round(waiting)
    return QueueStats(
        stream=STREAM,
        length=lag + pending,
        group=GROUP,
        pending=pending,
        lag=lag,
        oldest_age_s=round(max(p.oldest_age_s for p in world.pools), 3),
        last_delivered_id=f"{int(now * 1000)}-{int(world.stream_entries) % 1000}",
        consumers=SCHEDULER_CONSUMERS,
    )


class ReadOut:
    """Keeps the last frozen object of every entity; rebuilds only what the world marked."""

    def __init__(self, world: SimWorld) -> None:
        self._world = world
        self._gpus = [_gpu(g) for g in world.gpus]
        self._slots = [_slot(s) for s in world.slots]
        self._backends = [read_backend(b) for b in world.backends]
        self._latency = [_latency(b) for b in world.backends]
        self._checks = [_ready_check(b, None) for b in world.backends]
        self._checks_tuple = tuple(self._checks)
        self._gpu_pos = {g: i for i, g in enumerate(world.gpus)}
        self._slot_pos = {s: i for i, s in enumerate(world.slots)}
        self._backend_pos = {b: i for i, b in enumerate(world.backends)}
        self._clear()

    def _clear(self) -> None:
        w = self._world
        for dirty in (w.dirty_gpus, w.dirty_slots, w.dirty_backends, w.dirty_latency):
            dirty.clear()

    def read(self, now: float, give_way: Callable[[], object] | None = None) -> Reading:
        """The fleet's reading; ``give_way`` (the hub's, see ``SimSource``) is called between
        the kinds of entity rebuilt."""
        started = time.perf_counter()
        w = self._world
        for g in w.gpus_with_xid:
            if g.xid is not None and g.xid_at is None:  # raised since the last read
                g.xid_at = now - (w.time - g.xid[1])
                w.dirty_gpus.add(g)
        for g in w.dirty_gpus:
            self._gpus[self._gpu_pos[g]] = _gpu(g)
        for s in w.dirty_slots:
            pos = self._slot_pos.get(s)
            if pos is not None:  # None: a slot a re-slice destroyed (gpucon.sim.mig)
                self._slots[pos] = _slot(s)
        if give_way is not None:
            give_way()
        checks_changed = False
        for b in w.dirty_backends:
            i = self._backend_pos[b]
            self._backends[i] = read_backend(b)
            check = _ready_check(b, self._checks[i])
            if check is not self._checks[i]:
                self._checks[i] = check
                checks_changed = True
        if checks_changed:  # the same tuple otherwise: the hub's judge skips unchanged answers
            self._checks_tuple = tuple(self._checks)
        if give_way is not None:
            give_way()
        for b in w.dirty_latency:
            self._latency[self._backend_pos[b]] = _latency(b)
        self._clear()
        return Reading(
            source=SOURCE_NAME,
            health=Health.OK,
            taken_at=now,
            gpus=tuple(self._gpus),
            slots=tuple(self._slots),
            backends=tuple(self._backends),
            queues=(stream_stats(w, now),),
            latency=tuple(self._latency),
            ready_checks=self._checks_tuple,
            duration_s=time.perf_counter() - started,
        )
