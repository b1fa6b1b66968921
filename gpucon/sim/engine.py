"""Advances the simulated fleet through virtual time, one tick (at most 1 s) at a time.

Per tick and per model pool: arrivals from the tide and bursts enter the stream; the scheduler
places them on backends that take work (``active``, ready, weight > 0) by lowest
inflight/weight, none beyond its concurrent slots (``queueing.water_fill``); what cannot be
placed stays in the stream as backlog. Waiting time comes from the pool's queueing model, so
load, weights and drains move queue depth and p95. Each backend's busy servers follow what it
is sent; a backend that takes no work finishes what it has and its inflight decays to 0.
Slots and GPUs follow their backends. Flows are aggregated analytically; there are no
per-request objects, and the cost of a tick is O(backends).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from gpucon.sim.catalog import CONTEXT_MIB
from gpucon.sim.layout import FleetParts
from gpucon.sim.metrics import scrape_backend, scrape_slot
from gpucon.sim.parts import Pool, SimBackend, SimGpu, SimSlot
from gpucon.sim.queueing import (
    RHO_CAP,
    conditional_wait_s,
    variability,
    wait_probability,
    wait_quantile_s,
)
from gpucon.sim.takers import Takers
from gpucon.sim.traffic import BurstSchedule, tide

# share of a pool's capacity its daily peak offers (before bursts)
PEAK_LOAD = 0.5
# virtual time of day the simulation starts at: late morning, the tide rising
START_OF_DAY_S = 10.5 * 3600
MAX_TICK_S = 1.0
# smoothing of the arrival rate the queueing model sees (its Poisson noise); an incident's
# multiplier on the rate (``rate_factor``: a traffic spike) reaches the stream at once
RATE_TAU_S = 20.0
QUEUE_TAU_S = 30.0  # how fast a queue's load follows a change of rate or capacity


MAX_TEMP_C = 93.0


class SimWorld:
    """All mutable state of the simulated fleet and the rules that advance it."""

    def __init__(self, parts: FleetParts, rng: random.Random, scrape_every: int = 1) -> None:
        self.gpus = parts.gpus
        self.slots = parts.slots
        self.backends = parts.backends
        self.by_name: dict[str, SimBackend] = {b.name: b for b in parts.backends}
        self.rng = rng
        self.time = 0.0
        self.ticks = 0
        # metrics are scraped every ``scrape_every`` ticks, entities spread over the phases
        self.scrape_every = scrape_every
        self.start_of_day_s = START_OF_DAY_S
        self.registry_version = 0
        # model name -> extra multiplier on its arrival rate (scenarios)
        self.rate_factor: dict[str, float] = {}
        # called at the start of every tick with (world, time, dt): scenarios hook in here
        self.hooks: list[Callable[[SimWorld, float, float], None]] = []
        # GPUs a scenario raised an XID on (the read-out gives each its wall-clock time)
        self.gpus_with_xid: list[SimGpu] = []
        pools: dict[str, Pool] = {}
        for i, b in enumerate(parts.backends):
            pool = pools.setdefault(b.model.name, Pool(b.model))
            pool.backends.append(b)
            b.pool = pool
            b.phase = i % scrape_every
        for i, s in enumerate(parts.slots):
            s.phase = i % scrape_every
        for gpu in parts.gpus:
            gpu.phase = gpu.index % scrape_every
        self.slots_by_phase = tuple(
            tuple(s for s in parts.slots if s.phase == k) for k in range(scrape_every)
        )
        self.gpus_by_phase = tuple(
            tuple(g for g in parts.gpus if g.phase == k) for k in range(scrape_every)
        )
        # slots whose memory must be recomputed this tick (a backend's peak rose, an incident)
        self.mem_dirty: set[SimSlot] = set(parts.slots)
        # what changed since the last read-out: only these get new frozen objects
        self.dirty_gpus: set[SimGpu] = set(parts.gpus)
        self.dirty_slots: set[SimSlot] = set(parts.slots)
        self.dirty_backends: set[SimBackend] = set(parts.backends)
        self.dirty_latency: set[SimBackend] = set(parts.backends)
        self.pools = tuple(pools.values())
        self.bursts = {p.model.name: BurstSchedule(random.Random(rng.random())) for p in self.pools}
        for pool in self.pools:
            capacity = sum(b.concurrency / b.full_load_s() for b in pool.backends)
            pool.base_rate = PEAK_LOAD * capacity
            pool.rate = pool.base_rate * tide(self.start_of_day_s)
        self.stream_entries = 0.0  # entries ever added to the stream
        self._takers: dict[Pool, Takers] = {}  # each pool's, as of its last dispatch
        self._warm_start()

    def _warm_start(self) -> None:
        """Start in the steady state of the current load, not from an empty fleet."""
        for pool in self.pools:
            pool.calm_rate = pool.rate
            self._dispatch(pool, pool.rate, 1.0, 1.0, 0.0, 1.0)
            for b in pool.backends:
                compute = b.service_s * b.interference
                b.busy = b.alloc * compute
                b.inflight = round(b.busy)
                b.peak_busy = math.ceil(b.busy)
                b.rate = b.alloc
                b.done = b.alloc
                scrape_backend(b, pool, 1.0, self.rng)
        self._advance_slots(0.0, -1)
        for gpu in self.gpus:
            gpu.temperature_c = 31.0 + 0.48 * gpu.util_pct

    def bump(self, *changed: SimBackend) -> int:
        """Count one write to the registry (``gpucon:registry:version``) of these backends."""
        self.dirty_backends.update(changed)
        self.registry_version += 1
        return self.registry_version

    # -- stepping ---------------------------------------------------------------------------

    def step(self, dt_s: float, give_way: Callable[[], object] | None = None) -> None:
        """Advance by ``dt_s``; ``give_way`` (the hub's, see ``SimSource``) is called between
        the pools' steps (each a few ms at 2,048 GPUs), where the read may wait for a key."""
        if not dt_s > 0.0:
            return
        ticks = max(1, math.ceil(dt_s / MAX_TICK_S - 1e-9))
        for _ in range(ticks):
            self._tick(dt_s / ticks, give_way)

    def _tick(self, dt: float, give_way: Callable[[], object] | None = None) -> None:
        t = self.time
        for hook in self.hooks:
            hook(self, t, dt)
        level = tide(self.start_of_day_s + t)
        a_rate = 1.0 - math.exp(-dt / RATE_TAU_S)
        a_queue = 1.0 - math.exp(-dt / QUEUE_TAU_S)
        phase = self.ticks % self.scrape_every
        period_s = dt * self.scrape_every
        for pool in self.pools:
            name = pool.model.name
            offered = pool.base_rate * level * self.bursts[name].factor(t)
            self._dispatch(pool, offered, self.rate_factor.get(name, 1.0), dt, a_rate, a_queue)
            if give_way is not None:
                give_way()
            self._serve(pool, dt, phase, period_s)
            if give_way is not None:
                give_way()
        self._advance_slots(dt, phase)
        self.time = t + dt
        self.ticks += 1

    def _dispatch(
        self, pool: Pool, offered: float, factor: float, dt: float, a_rate: float, a_queue: float
    ) -> None:
        """Arrivals into the stream, placed on backends; the pool's waiting model.

        ``offered`` is the tide's and the random bursts' rate, ``factor`` an incident's
        multiplier on it: the rate the queue sees smooths the arrivals' noise over RATE_TAU_S,
        but follows the multiplier at once (a spike's requests are in the stream that second).
        """
        rng = self.rng
        expected = offered * factor * dt
        # Poisson-like noise on the count (uniform with the same variance: cheap)
        arrivals = max(0.0, expected + math.sqrt(expected) * (rng.random() - 0.5) * 3.46)
        self.stream_entries += arrivals
        if factor > 0.0:
            pool.calm_rate += (arrivals / factor / dt - pool.calm_rate) * a_rate
        pool.rate = pool.calm_rate * factor
        # who takes work, and each one's cap and key: worked out again only when one of
        # their inputs changed (``sim.takers``)
        takers = self._takers[pool] = Takers.of(pool.backends, self._takers.get(pool))
        # the smoothed rate drives the fluid backlog (sustained overload); the short-term
        # randomness of arrivals is the queueing model's business, not counted twice
        alloc = takers.fill(pool.rate + pool.backlog / dt)
        dispatched = sum(alloc)
        for b, a in zip(takers.takers, alloc, strict=True):
            b.alloc = a
        pool.backlog = max(0.0, pool.backlog + (pool.rate - dispatched) * dt)
        pool.dispatched = dispatched

        capacity = takers.capacity
        servers = takers.servers
        backlog_wait = pool.backlog / dispatched if dispatched > 0 else 0.0
        # a queue does not jump: its load relaxes toward the present one over QUEUE_TAU_S
        rho_now = pool.rate / capacity if capacity > 0.0 else 1.0
        pool.rho += (rho_now - pool.rho) * a_queue
        if capacity > 0.0:
            p_wait = wait_probability(pool.rho, servers)
            cv2 = pool.model.compute_cv**2
            theta = conditional_wait_s(pool.rho, capacity) * variability(1.0, cv2)
            rho_used = min(pool.rho, RHO_CAP)
        else:  # nobody takes work: everything waits
            p_wait, theta, rho_used = 1.0, 0.0, 1.0
        pool.p_wait = p_wait
        pool.queued_wait_s = p_wait * theta
        pool.backlog_wait_s = backlog_wait
        pool.waiting = pool.rate * p_wait * theta + pool.backlog
        # the oldest undelivered entry: the backlog's age, or now and then one that waits
        if pool.backlog >= 1.0:
            pool.oldest_age_s = backlog_wait if dispatched > 0 else pool.oldest_age_s + dt
        elif rng.random() < p_wait * rho_used:
            pool.oldest_age_s = rng.expovariate(1.0 / theta) if theta > 0 else 0.0
        else:
            pool.oldest_age_s = 0.0
        pool.waits = (
            wait_quantile_s(0.50, p_wait, theta) + backlog_wait,
            wait_quantile_s(0.95, p_wait, theta) + backlog_wait,
            wait_quantile_s(0.99, p_wait, theta) + backlog_wait,
        )

    def _serve(self, pool: Pool, dt: float, phase: int, period_s: float) -> None:
        """Each backend's busy servers, inflight and finished requests; scrape its metrics."""
        rng = self.rng
        random = rng.random
        slowdown = pool.model.batch_slowdown
        exp = math.exp
        ceil = math.ceil
        dirty = self.dirty_backends
        mem_dirty = self.mem_dirty
        dirty_latency = self.dirty_latency
        # a backend is marked dirty where its inflight is written with a new number (read
        # and compared only there, not once more for every backend after the branches)
        for b in pool.backends:
            busy = b.busy
            if b.takes:
                # a request holds a server for compute_s: busy follows alloc·compute_s that fast
                compute = b.alone  # service_s * interference (``Takers``)
                if busy > 1.0:
                    compute *= 1.0 + slowdown * (busy - 1.0)
                busy += (b.alloc * compute - busy) * (1.0 - exp(-dt / compute))
                b.compute_s = compute
                if busy > b.peak_busy:
                    b.peak_busy = ceil(busy)
                    mem_dirty.add(b.slot)
                done = busy / compute * dt
                # the count changes as requests start and end: slow models change rarely
                if random() < 2.0 * done:
                    inflight = int(busy + random())
                    if inflight != b.inflight:
                        b.inflight = inflight
                        dirty.add(b)
            elif busy > 0.0:
                if b.fails_health:  # connections refused: what was in flight is lost
                    done = busy = 0.0
                else:  # draining: what is in flight finishes, nothing new arrives
                    done = min(busy, dt * max(busy, 1.0) / b.compute_s)
                    busy = max(0.0, busy - done)
                inflight = ceil(busy - 1e-9)
                if inflight != b.inflight:
                    b.inflight = inflight
                    dirty.add(b)
            else:
                done = 0.0
                if b.inflight != 0:
                    b.inflight = 0
                    dirty.add(b)
            b.busy = busy
            b.done += done
            if b.phase == phase and scrape_backend(b, pool, period_s, rng):
                dirty_latency.add(b)

    def _advance_slots(self, dt: float, phase: int) -> None:
        """Scrape the slots and GPUs whose turn it is; recompute memory that moved."""
        rng = self.rng
        scraped = self.slots if phase < 0 else self.slots_by_phase[phase]
        dirty = self.mem_dirty
        for slot in scraped:
            slot.activity_pct = scrape_slot(slot, rng)
            dirty.add(slot)
        for slot in dirty:
            # the caching allocator keeps what the busiest moment needed
            mem = slot.leak_mib + slot.rogue_mib
            for b in slot.backends:
                model = b.model
                mem += CONTEXT_MIB + model.weights_mib + model.activation_mib * b.peak_busy
            top = slot.mem_total_mib - 48.0
            slot.mem_used_mib = mem if mem < top else top
            shown = (round(slot.activity_pct), round(slot.mem_used_mib), slot.processes)
            if shown != slot.shown:
                slot.shown = shown
                self.dirty_slots.add(slot)
        dirty.clear()
        period_s = dt * self.scrape_every
        a_temp = 1.0 - math.exp(-period_s / 60.0)
        a_hot = 1.0 - math.exp(-period_s / 20.0)
        for gpu in self.gpus if phase < 0 else self.gpus_by_phase[phase]:
            weighted = 0.0
            used = 0.0
            sms = 0
            for slot in gpu.slots:
                used += slot.mem_used_mib
                weighted += slot.activity_pct * slot.sm_count
                sms += slot.sm_count
            gpu_type = gpu.gpu_type
            gpu.util_pct = weighted / sms if sms else 0.0
            gpu.mem_used_mib = used
            # a GPU slowed down by heat holds itself below its shutdown temperature
            target_temp = min(MAX_TEMP_C, 31.0 + 0.48 * gpu.util_pct + gpu.heat_c)
            # without its cooling a GPU heats up three times faster
            follow = a_temp if gpu.heat_c <= 0.0 else a_hot
            gpu.temperature_c += (target_temp - gpu.temperature_c) * follow
            span = gpu_type.power_limit_w - gpu_type.idle_w
            gpu.power_w = gpu_type.idle_w + span * (0.85 * gpu.util_pct / 100.0)
            self.dirty_gpus.add(gpu)
