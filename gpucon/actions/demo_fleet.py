"""A simulated fleet for the action verbs' ``--demo``: built, warmed up, and kept moving.

The CLI has no hub; this runs the simulator in a background thread at ``speed`` times real
time (so a demo drain finishes in seconds) and turns its reading into a Snapshot to plan on.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from gpucon.model.merge import merge_readings
from gpucon.model.snapshot import Snapshot

WARMUP_S = 30.0


class DemoFleetRunner:
    def __init__(self, fleet: Any, speed: float = 5.0, tick_s: float = 0.05) -> None:
        self.fleet = fleet
        self.speed = speed
        self.tick_s = tick_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-fleet", daemon=True)

    @classmethod
    def start(cls, seed: int = 7, speed: float = 5.0) -> DemoFleetRunner:
        from gpucon.sim.fleet import build_sim_fleet

        fleet = build_sim_fleet(seed)
        fleet.step(WARMUP_S)  # traffic in flight and some history before the first plan
        runner = cls(fleet, speed)
        runner._thread.start()
        return runner

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.fleet.step(self.tick_s * self.speed)

    def snapshot(self) -> Snapshot:
        now = time.time()
        merged = merge_readings([self.fleet.reading(now)])
        return Snapshot(
            taken_at=now,
            gpus=merged.gpus,
            slots=merged.slots,
            backends=merged.backends,
            queues=merged.queues,
            latency=merged.latency,
            nodes=merged.nodes,
            origins=merged.origins,
        )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
