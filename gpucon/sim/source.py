"""The simulated fleet as a source: each read advances it by the time elapsed and reads it out.

In-process and instant; it exists so that ``gpucon demo`` and the UI tests go through the same
hub, merge and alert path as a live fleet.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpucon.model.reading import Reading
from gpucon.sim.fleet import SimFleet, build_sim_fleet

# a read after a long pause (a suspended laptop, a debugger) advances at most this much
MAX_CATCH_UP_S = 5.0


class SimSource:
    """``Source`` over a ``SimFleet``; virtual time follows ``clock``."""

    name = "sim"

    def __init__(
        self,
        fleet: SimFleet,
        clock: Callable[[], float] = time.time,
        cadence_s: float = 1.0,
        timeout_s: float = 2.0,
    ) -> None:
        self.fleet = fleet
        self.clock = clock
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self._last: float | None = None
        # set by the hub before each read: called between the read's steps (at 2,048 GPUs
        # the step and read-out are ~40 ms of Python, ~100 on a loaded machine), it waits
        # while the UI answers a key
        self.give_way: Callable[[], object] | None = None

    @classmethod
    def for_demo(
        cls,
        seed: int = 7,
        scenario: str | None = None,
        size: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> SimSource:
        """A source over a freshly built fleet (``gpucon demo --seed --scenario --size``)."""
        return cls(build_sim_fleet(seed, scenario, size), clock=clock)

    def read(self) -> Reading:
        now = self.clock()
        give_way = self.give_way
        if self._last is not None:
            self.fleet.step(min(MAX_CATCH_UP_S, max(0.0, now - self._last)), give_way)
            if give_way is not None:
                give_way()
        self._last = now
        return self.fleet.reading(now, give_way)

    def close(self) -> None:
        """Nothing to release: the fleet lives in this process."""
