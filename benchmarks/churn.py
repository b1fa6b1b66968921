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
import contextlib
import itertools
import sys

from gpucon.model.fleet import Backend, Gpu, LatencyStats, Slot
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
        # each entity built with its constructor from the values read, as a live source
        # builds its entities from what it parsed (not copied with ``msgspec.structs.replace``)
        return Reading(
            source=r.source,
            health=r.health,
            taken_at=r.taken_at,
            gpus=tuple([_gpu(g, step) for g in r.gpus]),
            slots=tuple([_slot(s, step) for s in r.slots]),
            backends=tuple([_backend(b, n % 3) for b in r.backends]),
            queues=r.queues,
            latency=tuple([_latency(lat, step) for lat in r.latency]),
            nodes=r.nodes,
            ready_checks=r.ready_checks,
            target_up=r.target_up,
            mps=r.mps,
            error=r.error,
            duration_s=r.duration_s,
            round_trips=r.round_trips,
        )

    def close(self) -> None:
        self.inner.close()


# Each record is built with its constructor, every field passed positionally in the order its
# class declares them (``tests/unit/test_churn_source.py`` holds the order to the classes).
# A call with more than 15 keyword arguments is compiled to build a dict of them first
# (CPython), about 1.5 µs a record against 0.3 µs: naming all 20 of a slot's fields, the
# harness would measure its own call style. gpucon's sources name the fields they read.


def _gpu(g: Gpu, step: float) -> Gpu:
    t = g.temperature_c
    p = g.power_w
    return Gpu(
        g.uuid,
        g.host,
        g.index,
        g.name,
        g.util_pct,
        g.mem_used_mib,
        g.mem_total_mib,
        None if t is None else t + step,
        None if p is None else p + step,
        g.power_limit_w,
        g.sm_clock_mhz,
        g.mem_clock_mhz,
        g.mig_enabled,
        g.sm_count,
        g.processes,
        g.mig_profiles,
        g.xid_last,
        g.xid_at,
        g.xid_watched,
        g.thermal_slowdown,
        g.power_capped,
    )


def _slot(s: Slot, step: float) -> Slot:
    m = s.mem_used_mib
    a = s.activity_pct
    return Slot(
        s.id,
        s.kind,
        s.host,
        s.gpu_uuid,
        s.gpu_index,
        s.gpu_name,
        s.profile,
        s.gi_id,
        s.ci_id,
        s.sm_count,
        None if m is None else m + step,
        s.mem_total_mib,
        None if a is None else a + step,
        s.activity_metric,
        s.sm_active_pct,
        s.dram_active_pct,
        s.vm,
        s.pod,
        s.node,
        s.processes,
    )


def _backend(b: Backend, more: int) -> Backend:
    return Backend(
        b.name,
        b.slot_id,
        b.url,
        b.model,
        b.weight,
        b.state,
        (b.inflight or 0) + more,
        b.ready,
        b.ready_at,
        b.owner,
        b.reason,
        b.pod,
        b.node,
    )


def _latency(lat: LatencyStats, step: float) -> LatencyStats:
    r = lat.req_per_s
    p95 = lat.p95_ms
    return LatencyStats(
        lat.key,
        None if r is None else r + step,
        lat.p50_ms,
        None if p95 is None else p95 + step,
        lat.p99_ms,
        lat.error_rate,
        lat.errors_by_reason,
        lat.queue_ms,
        lat.compute_ms,
        lat.pending,
        lat.avg_ms,
        lat.address,
        lat.model,
        lat.versions,
        lat.rate_window_s,
    )


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
    with contextlib.suppress(ImportError):  # an older checkout: the collector paces itself
        from gpucon.commands.gc_pace import collect_between_ticks

        hub.between_ticks = collect_between_ticks
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
