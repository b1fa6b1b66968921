"""Queueing formulas the simulator uses, per model pool and per tick, in O(1) each.

A model's backends form one multi-server queue fed by the request stream: the scheduler takes
an entry when some backend has a free slot, choosing the lowest inflight/weight. Waiting time
follows the M/M/c approximation (Sakasegawa) scaled by the Allen–Cunneen variability factor;
its tail is exponential with rate c·μ·(1−ρ). Overload (ρ ≥ 1) is a fluid backlog instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# utilization the steady-state formulas are evaluated at, at most (beyond: backlog grows)
RHO_CAP = 0.95


def wait_probability(rho: float, servers: float) -> float:
    """Probability that an arriving request finds every server busy (Sakasegawa's M/M/c)."""
    if rho <= 0.0:
        return 0.0
    rho = min(rho, RHO_CAP)
    return float(rho ** (math.sqrt(2.0 * (servers + 1.0)) - 1.0))


def conditional_wait_s(rho: float, capacity_per_s: float) -> float:
    """Mean wait of a request that does wait: 1 / (c·μ·(1−ρ)), with c·μ the pool's capacity."""
    return 1.0 / (capacity_per_s * (1.0 - min(rho, RHO_CAP)))


def variability(arrival_cv2: float, service_cv2: float) -> float:
    """Allen–Cunneen factor: how much burstier than M/M/c the arrivals and services are."""
    return (arrival_cv2 + service_cv2) / 2.0


def wait_quantile_s(q: float, p_wait: float, theta_s: float) -> float:
    """The ``q`` quantile of the waiting time, where P(W > x) = p_wait · exp(−x/theta)."""
    tail = 1.0 - q
    if p_wait <= tail or theta_s <= 0.0:
        return 0.0
    return theta_s * math.log(p_wait / tail)


def water_fill(demand: float, keys: Sequence[float], caps: Sequence[float]) -> list[float]:
    """Split ``demand`` in proportion to ``keys``, none above its cap; the rest is not placed.

    This is the steady state of a lowest-inflight/weight scheduler: with key = weight /
    service time every backend ends up with the same inflight per weight, until it is full.
    """
    n = len(keys)
    alloc = [0.0] * n
    open_ = [i for i in range(n) if keys[i] > 0.0 and caps[i] > 0.0]
    remaining = demand
    while open_ and remaining > 1e-12:
        total = sum([keys[i] for i in open_])  # the same sum, its terms in a list (faster)
        scale = remaining / total
        full = [i for i in open_ if keys[i] * scale >= caps[i]]
        if not full:
            for i in open_:
                alloc[i] = keys[i] * scale
            return alloc
        for i in full:
            alloc[i] = caps[i]
            remaining -= caps[i]
        open_ = [i for i in open_ if keys[i] * scale < caps[i]]
    return alloc
