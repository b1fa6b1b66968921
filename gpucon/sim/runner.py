"""A simulated fleet for the action verbs' ``--demo``: warmed up, and kept moving.

The CLI has no hub; this runs the simulator in a background thread at ``speed`` times real
time (so a demo drain finishes in seconds) and turns its reading into a Snapshot to plan on.
The warm-up goes a second at a time and keeps the history rings the hub would have kept, so a
verb plans on a window of history (rebalance's capacity estimate needs one) and the demo's
per-model SLOs, as the console does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from gpucon.hub import history_samples
from gpucon.model.history import History
from gpucon.model.merge import merge_readings
from gpucon.model.snapshot import Snapshot
from gpucon.sim.catalog import DEMO_SLO_P95_MS
from gpucon.sim.fleet import SimFleet

WARMUP_S = 30.0


class DemoFleetRunner:
    def __init__(
        self,
        fleet: SimFleet,
        speed: float = 5.0,
        tick_s: float = 0.05,
        slo_p95_ms_by_model: Mapping[str, float] | None = None,
    ) -> None:
        self.fleet = fleet
        self.speed = speed
        self.tick_s = tick_s
        self.slo_p95_ms_by_model = dict(
            DEMO_SLO_P95_MS if slo_p95_ms_by_model is None else slo_p95_ms_by_model
        )
        self.history = History()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-fleet", daemon=True)

    @classmethod
    def over(
        cls,
        fleet: SimFleet,
        speed: float = 5.0,
        slo_p95_ms_by_model: Mapping[str, float] | None = None,
    ) -> DemoFleetRunner:
        """Warm ``fleet`` up (traffic in flight, some history), then keep it moving."""
        runner = cls(fleet, speed, slo_p95_ms_by_model=slo_p95_ms_by_model)
        runner.warm_up(WARMUP_S)
        runner._thread.start()
        return runner

    def warm_up(self, seconds: float) -> None:
        """Step ``seconds`` of virtual time, one history sample per second, ending now."""
        end = time.time()
        ticks = int(seconds)
        for i in range(ticks):
            self.fleet.step(1.0)
            stamp = end - (ticks - 1 - i)
            merged = merge_readings([self.fleet.reading(stamp)])
            self.history = self.history.append(stamp, history_samples(merged))

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.fleet.step(self.tick_s * self.speed)

    def snapshot(self) -> Snapshot:
        now = time.time()
        merged = merge_readings([self.fleet.reading(now)])
        slo = {
            b.name: self.slo_p95_ms_by_model[b.model]
            for b in merged.backends.values()
            if b.model is not None and b.model in self.slo_p95_ms_by_model
        }
        return Snapshot(
            taken_at=now,
            gpus=merged.gpus,
            slots=merged.slots,
            backends=merged.backends,
            queues=merged.queues,
            latency=merged.latency,
            nodes=merged.nodes,
            origins=merged.origins,
            history=self.history,
            slo_p95_ms=slo,
        )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
