"""What the simulated fleet's metrics show, computed when they are scraped.

Latency per backend and activity per slot come from Prometheus in a real fleet (Triton and
dcgm-exporter), so they change when scraped, not every tick: each entity has a phase; the
default fleet scrapes every tick, benchmark sizes every 10 ticks (a tenth of the entities per
tick, as a 10 s scrape interval would). Values are rounded to what a
console shows and kept as a tuple that is replaced only when a value changed, so read-out
rebuilds a frozen object only for entities whose tuple is new.
"""

from __future__ import annotations

import math
import random

from gpucon.sim.parts import Pool, SimBackend, SimSlot

STATS_TAU_S = 10.0  # smoothing of per-backend rates (a Prometheus rate() window)
STATS_WINDOW_S = 10.0  # requests per window decide whether any wait shows at all
BATCH_DELAY_S = 0.0008  # the dynamic batcher's own queue delay
JITTER = 0.04  # relative measurement noise on latency quantiles
Z95, Z99 = 1.645, 2.326


def ms(seconds: float) -> float:
    """Milliseconds to about three significant digits (what a console can show)."""
    value = seconds * 1000.0
    if value >= 100.0:
        return float(round(value))
    return round(value, 1) if value >= 10.0 else round(value, 2)


def scrape_backend(b: SimBackend, pool: Pool, period_s: float, rng: random.Random) -> bool:
    """Recompute what ``b``'s metrics show from the requests it finished since last scrape.

    True when a shown value changed.
    """
    done_rate = b.done / period_s
    b.done = 0.0
    b.rate += (done_rate - b.rate) * (1.0 - math.exp(-period_s / STATS_TAU_S))
    if b.rate < 1e-3:
        b.rate = 0.0
        shown: tuple[float, ...] = (0.0,)
        if shown == b.shown:
            return False
        b.shown = shown
        return True
    p_wait = pool.p_wait
    # a window in which none of its requests waited shows no queue time at all
    p_none = (1.0 - p_wait) ** (b.rate * STATS_WINDOW_S) if p_wait < 1.0 else 0.0
    waited = pool.queued_wait_s / (1.0 - p_none) if rng.random() >= p_none else 0.0
    b.queue_s = BATCH_DELAY_S + pool.backlog_wait_s + waited
    noise = 1.0 + JITTER * (rng.random() - 0.5)
    compute = b.compute_s
    cv = b.model.compute_cv
    w50, w95, w99 = pool.waits
    shown = (
        round(b.rate, 2),
        ms((compute + w50) * noise),
        ms((compute * (1.0 + Z95 * cv) + w95) * noise),
        ms((compute * (1.0 + Z99 * cv) + w99) * noise),
        round(b.error_rate, 3),
        ms(b.queue_s),
        ms(compute * noise),
        ms(b.queue_s + compute),
    )
    if shown == b.shown:
        return False
    b.shown = shown
    return True


def scrape_slot(slot: SimSlot, rng: random.Random) -> float:
    """The slot's activity now (percent), as DCGM or NVML would report it."""
    idle = 1.0 - slot.rogue_busy
    for b in slot.backends:
        frac = b.busy / b.concurrency
        idle *= 1.0 - (frac if frac < 1.0 else 1.0)
    act = 100.0 * (1.0 - idle)
    if act > 1.0:  # sampling noise, which vanishes as the engine saturates
        act += (rng.random() - 0.5) * min(3.0, 2.0 * (100.0 - act))
    return 100.0 if act > 100.0 else (act if act > 0.0 else 0.0)
