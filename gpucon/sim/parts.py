"""The simulated fleet's mutable state: GPUs, slots, backends and model pools.

Plain ``__slots__`` classes, stepped in place once per tick by ``engine`` and read out into
frozen model objects by ``readout``. Each keeps the frozen object it was last read out as, so
a tick whose (rounded) values did not change reuses it instead of building a new one.
"""

from __future__ import annotations

from gpucon.model.fleet import (
    Backend,
    BackendState,
    ComputeProcess,
    Gpu,
    LatencyStats,
    Slot,
    SlotKind,
    VmInfo,
)
from gpucon.model.ids import mig_slot_id
from gpucon.model.mig_profiles import MigProfile
from gpucon.sim.catalog import GpuType, ModelSpec
from gpucon.sim.taker_inputs import TakerInputs


class SimGpu:
    __slots__ = (
        "cached",
        "cached_key",
        "gpu_type",
        "heat_c",
        "host",
        "index",
        "mem_used_mib",
        "mig_enabled",
        "phase",
        "power_w",
        "slots",
        "temperature_c",
        "util_pct",
        "uuid",
        "xid",
        "xid_at",
    )

    def __init__(self, uuid: str, host: str, index: int, gpu_type: GpuType, mig: bool) -> None:
        self.uuid = uuid
        self.host = host
        self.index = index
        self.gpu_type = gpu_type
        self.mig_enabled = mig
        self.slots: list[SimSlot] = []
        self.util_pct = 0.0
        self.mem_used_mib = 0.0
        self.temperature_c = 34.0
        self.power_w = gpu_type.idle_w
        self.phase = 0
        self.cached: Gpu | None = None
        self.cached_key: tuple[object, ...] | None = None
        # incidents: extra heat from failing cooling (°C over what its load makes), the last
        # XID raised (code, simulation time) and when it was raised in wall-clock time
        self.heat_c = 0.0
        self.xid: tuple[int, float] | None = None
        self.xid_at: float | None = None


class SimSlot:
    __slots__ = (
        "activity_metric",
        "activity_pct",
        "backends",
        "cached",
        "cached_key",
        "ci_id",
        "gi_id",
        "gpu",
        "id",
        "kind",
        "leak_mib",
        "mem_total_mib",
        "mem_used_mib",
        "phase",
        "placement",
        "processes",
        "profile",
        "rogue_busy",
        "rogue_mib",
        "shown",
        "sm_count",
        "vm",
    )

    def __init__(
        self,
        slot_id: str,
        kind: SlotKind,
        gpu: SimGpu,
        profile: str,
        sm_count: int,
        mem_total_mib: float,
        gi_id: int | None = None,
        vm: VmInfo | None = None,
    ) -> None:
        self.id = slot_id
        self.kind = kind
        self.gpu = gpu
        self.profile = profile
        self.sm_count = sm_count
        self.mem_total_mib = mem_total_mib
        self.gi_id = gi_id
        self.ci_id = 0 if gi_id is not None else None
        # a MIG instance's (start, size) in memory slices, where known (a re-slice sets it)
        self.placement: tuple[int, int] | None = None
        self.vm = vm
        self.backends: list[SimBackend] = []
        self.activity_pct = 0.0
        self.activity_metric = {
            SlotKind.MIG: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            SlotKind.GPU: "GPM SM activity",
            SlotKind.VM: "GPU util (guest NVML)",
        }[kind]
        self.mem_used_mib = 0.0
        # incidents: memory leaked by a server, and a process outside the scheduler
        self.leak_mib = 0.0
        self.rogue_busy = 0.0
        self.rogue_mib = 0.0
        self.processes: tuple[ComputeProcess, ...] = ()
        self.phase = 0
        # (activity %, memory used MiB, processes) as shown; a new tuple when one changes
        self.shown: tuple[int, int, tuple[ComputeProcess, ...]] | None = None
        self.cached: Slot | None = None
        self.cached_key: tuple[int, int, tuple[ComputeProcess, ...]] | None = None


class SimBackend(TakerInputs):
    __slots__ = (
        "alloc",
        "alone",
        "busy",
        "cached",
        "cached_key",
        "capacity",
        "compute_s",
        "done",
        "down_for_s",
        "error_rate",
        "inflight",
        "jitter",
        "latency",
        "latency_key",
        "model",
        "name",
        "owner",
        "peak_busy",
        "phase",
        "pool",
        "queue_s",
        "rate",
        "reason",
        "shown",
        "slot",
        "takes",
        "url",
    )

    def __init__(
        self,
        name: str,
        slot: SimSlot,
        url: str,
        model: ModelSpec,
        weight: float,
        service_s: float,
        concurrency: int,
    ) -> None:
        self.name = name
        self.slot = slot
        self.url = url
        self.model = model
        self.weight = weight
        self.state = BackendState.ACTIVE
        self.ready = True
        self.owner: str | None = None
        self.reason: str | None = None
        # one request alone; the scheduler's view of the backend's speed
        self.service_s = service_s
        self.concurrency = concurrency
        # a full backend computes ``concurrency`` requests, each this much slower than alone
        self.batch_factor = 1.0 + model.batch_slowdown * (concurrency - 1)
        self.peak_busy = 0  # most requests it computed at once (its memory high-water mark)
        self.interference = 1.0  # > 1 while something else slows this backend's GPU down
        self.fails_health = False  # the backend's /v2/health/ready fails (incident)
        self.down_for_s = 0.0
        self.pool: Pool | None = None
        # per tick: rate sent to it, mean requests computing, the integer the registry shows
        self.alloc = 0.0
        self.busy = 0.0
        self.inflight = 0
        self.rate = 0.0  # req/s as a 1-minute-ish rate
        self.error_rate = 0.0
        self.capacity = 0.0
        self.compute_s = service_s
        self.queue_s = 0.0  # mean wait of its requests as its metrics window shows it
        self.jitter = 0.0  # this tick's measurement noise, in [-0.5, 0.5)
        self.takes = True  # takes new work this tick
        self.alone = service_s  # service_s * interference while it takes work (``Takers``)
        self.done = 0.0  # requests finished since its metrics were last scraped
        self.phase = 0  # the tick (modulo the scrape period) its metrics are scraped at
        # latency as its metrics show it (rounded); a new tuple whenever a value changes
        self.shown: tuple[float, ...] = ()
        self.cached: Backend | None = None
        self.cached_key: tuple[object, ...] | None = None
        self.latency: LatencyStats | None = None
        self.latency_key: tuple[object, ...] | None = None

    def full_load_s(self) -> float:
        """Seconds per request with every concurrent slot busy (the backend's capacity)."""
        return self.service_s * self.interference * self.batch_factor


class Pool:
    """The backends that serve one model, and that model's share of the request stream."""

    __slots__ = (
        "backends",
        "backlog",
        "backlog_wait_s",
        "base_rate",
        "calm_rate",
        "dispatched",
        "model",
        "oldest_age_s",
        "p_wait",
        "queued_wait_s",
        "rate",
        "rho",
        "waiting",
        "waits",
    )

    def __init__(self, model: ModelSpec) -> None:
        self.model = model
        self.backends: list[SimBackend] = []
        self.base_rate = 0.0  # req/s at the daily peak, before bursts
        self.rate = 0.0  # arrival rate the queueing model sees: calm_rate times the incident's
        self.calm_rate = 0.0  # smoothed arrival rate of the tide and bursts, before any incident
        self.rho = 0.0  # load on the backends that take work, as the queue has felt it
        self.backlog = 0.0  # entries in the stream not yet delivered to a backend
        self.dispatched = 0.0  # req/s delivered this tick
        self.waiting = 0.0  # mean entries waiting for a free backend (queueing model)
        self.p_wait = 0.0  # share of requests that wait at all
        self.queued_wait_s = 0.0  # mean wait from queueing (P(wait) · mean wait if waiting)
        self.backlog_wait_s = 0.0  # wait behind the backlog (overload), everyone
        self.oldest_age_s = 0.0
        self.waits = (0.0, 0.0, 0.0)  # p50, p95, p99 of the wait, seconds


def mig_slot(gpu: SimGpu, gi_id: int, profile: MigProfile) -> SimSlot:
    """GPU instance ``gi_id`` of ``profile`` on ``gpu`` (its compute instance 0), as the
    default layout builds it and as a re-slice creates it."""
    return SimSlot(
        mig_slot_id(gpu.host, gpu.index, gi_id),
        SlotKind.MIG,
        gpu,
        profile.name,
        profile.sm_count,
        float(profile.memory_mib),
        gi_id=gi_id,
    )
