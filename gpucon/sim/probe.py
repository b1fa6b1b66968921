"""The load probe over the simulated fleet: ``gpucon demo``'s ``p`` and ``gpucon probe --demo``.

``SimProber.probe(target, bounds, on_progress)`` runs the same bounded engine as a live probe
(``gpucon.controls.probe.run_probe``: count, rate, concurrency and duration, per-request
timeout, the same report), in wall-clock time — the demo's fleet follows the wall clock too.
Instead of sending HTTP, each request's latency is drawn from the simulator's model of that
backend at the moment it is sent: its service time on its slot (``service_s`` times the
interference of its neighbours), slowed by batching with everything it computes now (its busy
servers plus the probe's own requests in flight), a wait for a free server when those exceed
its concurrency, and the model's compute variability (log-normal with the model's CV). A
backend that is not ready refuses the connection; one with errors fails that share of them.
Nothing is sent anywhere and the simulated fleet is not changed.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpucon.controls.probe import ProbeBounds, ProbeProgress, ProbeResult, run_probe
from gpucon.sim.metrics import BATCH_DELAY_S

if TYPE_CHECKING:
    from gpucon.config import ProbeTarget
    from gpucon.sim.fleet import SimFleet

REFUSED = "connect: refused"
SERVER_ERROR = "http 500"


@dataclass(frozen=True, slots=True)
class ServiceNow:
    """What the simulator says about one backend at this moment (read under the fleet's lock)."""

    ready: bool
    service_s: float  # one request alone, with the slot's interference
    busy: float  # requests it computes now (mean busy servers)
    concurrency: int
    batch_slowdown: float  # extra time per co-running request
    compute_cv: float
    error_rate: float


def service_now(fleet: SimFleet, name: str) -> ServiceNow:
    """The backend's service model now; KeyError naming it when the fleet has no such backend.

    Reads the simulator's state under the fleet's own lock (the fleet keeps no public view of
    service times: its registry view is what a scheduler sees, not how fast a server is).
    """
    with fleet._lock:
        b = fleet._world.by_name.get(name)
        if b is None:
            raise KeyError(f"backend {name!r} is not in the simulated fleet")
        return ServiceNow(
            ready=b.ready and not b.fails_health,
            service_s=b.service_s * b.interference,
            busy=b.busy,
            concurrency=b.concurrency,
            batch_slowdown=b.model.batch_slowdown,
            compute_cv=b.model.compute_cv,
            error_rate=b.error_rate,
        )


def draw_latency_s(now: ServiceNow, probe_inflight: int, rng: random.Random) -> float | str:
    """One request's latency (seconds) at this load, or the error it gets."""
    if not now.ready:
        return REFUSED
    if now.error_rate > 0.0 and rng.random() < now.error_rate:
        return SERVER_ERROR
    running = now.busy + probe_inflight  # this request included
    co_running = min(running, float(now.concurrency))
    compute = now.service_s * (1.0 + now.batch_slowdown * max(0.0, co_running - 1.0))
    wait = 0.0
    if running > now.concurrency:  # every server busy: wait behind the excess
        wait = rng.expovariate(now.concurrency / ((running - now.concurrency) * compute))
    sigma2 = math.log1p(now.compute_cv**2)
    spread = rng.lognormvariate(-sigma2 / 2.0, math.sqrt(sigma2)) if sigma2 > 0 else 1.0
    return BATCH_DELAY_S + wait + compute * spread


class SimSender:
    """The probe engine's Sender over one simulated backend (see the module docstring)."""

    def __init__(
        self,
        sample: Callable[[str], ServiceNow],
        backend: str,
        rng: random.Random,
    ) -> None:
        self.sample = sample
        self.backend = backend
        self.rng = rng
        self.inflight = 0
        self.most_inflight = 0  # the most requests outstanding at once (the concurrency bound)

    async def send(self, seq: int) -> str | None:
        self.inflight += 1
        self.most_inflight = max(self.most_inflight, self.inflight)
        try:
            try:
                now = self.sample(self.backend)
            except KeyError:
                return "unknown backend"
            latency = draw_latency_s(now, self.inflight, self.rng)
            if isinstance(latency, str):
                return latency
            await asyncio.sleep(latency)
            return None
        finally:
            self.inflight -= 1

    async def aclose(self) -> None:
        """Nothing to close."""


class SimProber:
    """The probe control of the demo (``Controls.prober``): every backend is a target."""

    def __init__(self, fleet: SimFleet, seed: int | None = None) -> None:
        self.fleet = fleet
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.last_sender: SimSender | None = None

    simulated = True

    def probe(
        self,
        target: ProbeTarget,
        bounds: ProbeBounds,
        on_progress: Callable[[ProbeProgress], None] | None = None,
        *,
        via_queue: bool = False,
        redis_url: str | None = None,
        stream: str = "gen:queue",
    ) -> ProbeResult:
        """Run one bounded probe of ``target`` (blocking: call it from a worker thread).

        The simulated fleet has no queue to probe through: ``via_queue`` is refused when the
        plan is made, and the queue arguments are ignored here."""
        backend = target.name
        with self._lock:
            rng = random.Random(self._rng.random())
        sender = SimSender(lambda name: service_now(self.fleet, name), backend, rng)
        self.last_sender = sender
        return asyncio.run(
            run_probe(sender, bounds, target=backend, mode="sim", on_progress=on_progress)
        )
