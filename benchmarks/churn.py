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


def _nudge(v: float | None, step: float) -> float | None:
    return None if v is None else v + step


def _gpu(g: Gpu, step: float) -> Gpu:
    return Gpu(
        uuid=g.uuid,
        host=g.host,
        index=g.index,
        name=g.name,
        util_pct=g.util_pct,
        mem_used_mib=g.mem_used_mib,
        mem_total_mib=g.mem_total_mib,
        temperature_c=_nudge(g.temperature_c, step),
        power_w=_nudge(g.power_w, step),
        power_limit_w=g.power_limit_w,
        sm_clock_mhz=g.sm_clock_mhz,
        mem_clock_mhz=g.mem_clock_mhz,
        processes=g.processes,
        mig_enabled=g.mig_enabled,
        sm_count=g.sm_count,
        mig_profiles=g.mig_profiles,
        xid_watched=g.xid_watched,
        xid_last=g.xid_last,
        xid_at=g.xid_at,
        thermal_slowdown=g.thermal_slowdown,
        power_capped=g.power_capped,
    )


def _slot(s: Slot, step: float) -> Slot:
    return Slot(
        id=s.id,
        kind=s.kind,
        host=s.host,
        gpu_uuid=s.gpu_uuid,
        gpu_index=s.gpu_index,
        gpu_name=s.gpu_name,
        profile=s.profile,
        gi_id=s.gi_id,
        ci_id=s.ci_id,
        sm_count=s.sm_count,
        mem_used_mib=_nudge(s.mem_used_mib, step),
        mem_total_mib=s.mem_total_mib,
        activity_pct=_nudge(s.activity_pct, step),
        activity_metric=s.activity_metric,
        sm_active_pct=s.sm_active_pct,
        dram_active_pct=s.dram_active_pct,
        vm=s.vm,
        pod=s.pod,
        node=s.node,
        processes=s.processes,
    )


def _backend(b: Backend, more: int) -> Backend:
    return Backend(
        name=b.name,
        slot_id=b.slot_id,
        url=b.url,
        model=b.model,
        weight=b.weight,
        state=b.state,
        inflight=(b.inflight or 0) + more,
        ready=b.ready,
        ready_at=b.ready_at,
        owner=b.owner,
        reason=b.reason,
        pod=b.pod,
        node=b.node,
    )


def _latency(lat: LatencyStats, step: float) -> LatencyStats:
    return LatencyStats(
        key=lat.key,
        rate_window_s=lat.rate_window_s,
        req_per_s=_nudge(lat.req_per_s, step),
        p50_ms=lat.p50_ms,
        p95_ms=_nudge(lat.p95_ms, step),
        p99_ms=lat.p99_ms,
        error_rate=lat.error_rate,
        errors_by_reason=lat.errors_by_reason,
        queue_ms=lat.queue_ms,
        compute_ms=lat.compute_ms,
        pending=lat.pending,
        avg_ms=lat.avg_ms,
        address=lat.address,
        model=lat.model,
        versions=lat.versions,
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
