"""The demo fleet with every value changing every tick: the worst case for per-tick work.

The simulator changes only the entities whose shown values moved (about a tenth at 512 GPUs
in a calm minute) and hands the rest on as the same objects, which the merge, the history and
the row caches skip. A live fleet's sources build new objects every read. ``ChurnSource``
wraps the simulator's source and gives every GPU, slot, backend and latency a new object with
new numbers each read (as a live source would), so nothing can be skipped.

``python -m benchmarks.churn --size 512`` runs the console on it (what ``steady_state
--churn`` and ``tick_cost --churn`` measure).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace

from gpucon.model.reading import Reading
from gpucon.sim.source import SimSource


class ChurnSource:
    """A source whose every entity has new values on every read."""

    def __init__(self, inner: SimSource) -> None:
        self.inner = inner
        self.name = inner.name
        self.cadence_s = inner.cadence_s
        self.timeout_s = inner.timeout_s
        self._tick = itertools.count(1)

    def read(self) -> Reading:
        r = self.inner.read()
        n = next(self._tick)
        step = 0.1 * (n % 7 + 1)  # a different small change on every read

        def nudge(v: float | None) -> float | None:
            return None if v is None else v + step

        return replace(
            r,
            gpus=tuple(
                replace(g, temperature_c=nudge(g.temperature_c), power_w=nudge(g.power_w))
                for g in r.gpus
            ),
            slots=tuple(
                replace(s, activity_pct=nudge(s.activity_pct), mem_used_mib=nudge(s.mem_used_mib))
                for s in r.slots
            ),
            backends=tuple(replace(b, inflight=(b.inflight or 0) + n % 3) for b in r.backends),
            latency=tuple(
                replace(lat, p95_ms=nudge(lat.p95_ms), req_per_s=nudge(lat.req_per_s))
                for lat in r.latency
            ),
        )

    def close(self) -> None:
        self.inner.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--calm", action="store_true", help="the plain simulator, no churn")
    args = parser.parse_args()
    import gc

    import gpucon.sim.layout
    from gpucon.app import GpuconApp
    from gpucon.hub import Hub
    from gpucon.sim import DEMO_SLO_P95_MS

    try:
        from gpucon.commands.console import _collector_on as collector_on
    except ImportError:  # an older checkout (benchmarks --base): the collector just comes on
        collector_on = gc.enable
    # an older checkout had a lower cap
    gpucon.sim.layout.MAX_SIZE = max(gpucon.sim.layout.MAX_SIZE, args.size)
    sim = SimSource.for_demo(7, None, args.size)
    source = sim if args.calm else ChurnSource(sim)
    hub = Hub([source], refresh_s=1.0, slo_p95_ms_by_model=DEMO_SLO_P95_MS)
    hub.poll_once()
    hub.tick()
    app = GpuconApp(hub, mode="demo")
    gc.disable()  # as the console does: on (and tuned) after the first frame
    app.after_first_frame.append(collector_on)
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
