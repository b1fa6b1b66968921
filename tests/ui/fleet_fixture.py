"""A small hand-built fleet for UI tests, read through a real Hub with a frozen clock.

``HandSource`` is a Source whose Reading is a pure function of a step counter, so the UI tests
see the same snapshots every run. ``hub_with`` builds a Hub over it; ``advance`` steps the
clock, polls and ticks (no background thread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpucon.hub import Hub
from gpucon.model.fleet import (
    Backend,
    BackendState,
    Gpu,
    Health,
    LatencyStats,
    MpsState,
    NodeInfo,
    QueueStats,
    Slot,
    SlotKind,
    VmInfo,
)
from gpucon.model.ids import gpu_slot_id, mig_slot_id, vm_slot_id
from gpucon.model.liveness import ReadyCheck
from gpucon.model.reading import Reading
from gpucon.model.snapshot import Snapshot

T0 = 1_790_000_000.0  # a fixed wall-clock start (2026-09-21)


@dataclass
class FrozenClock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


def _wave(step: int, phase: float, lo: float, hi: float) -> float:
    return round(lo + (hi - lo) * (0.5 + 0.5 * math.sin(step / 4 + phase)), 1)


@dataclass
class HandSource:
    """Two hosts with MIG slices, one whole H200, two RTX 4090 VMs with MPS; one queue."""

    name: str = "hand"
    cadence_s: float = 1.0
    timeout_s: float = 1.0
    step: int = 0
    hosts: int = 1  # copies of the fleet (for big-table tests)
    host_names: tuple[str, ...] = ("gpu-a", "gpu-b")
    health: Health = Health.OK
    extra_backends: list[Backend] = field(default_factory=list)
    # gpu-b's A100 in trouble: XID 79 seen at T0 + 2, thermal slowdown, power capped
    gpu_trouble: bool = False
    nodes: tuple[NodeInfo, ...] = ()

    def read(self) -> Reading:
        s = self.step
        slots: list[Slot] = []
        backends: list[Backend] = list(self.extra_backends)
        latency: list[LatencyStats] = []
        gpus: list[Gpu] = []
        for copy in range(self.hosts):
            suffix = "" if copy == 0 else f"-{copy}"
            a, b = (h + suffix for h in self.host_names)
            layout = [
                (
                    a,
                    0,
                    "A100-SXM4-80GB",
                    [(1, "3g.40gb", 40192), (2, "2g.20gb", 19968), (9, "1g.10gb", 9728)],
                ),
                (
                    b,
                    0,
                    "A100-SXM4-40GB",
                    [(1, "3g.20gb", 20096), (5, "2g.10gb", 9856), (13, "1g.5gb", 4864)],
                ),
            ]
            models = ["sdxl", "sdxl", "sd15", "sd", "bert", "resnet50"]
            i = 0
            for host, index, gpu_name, parts in layout:
                uuid = f"GPU-{host}-{index}"
                gpus.append(self._gpu(uuid, host, index, gpu_name, trouble=host == b))
                for gi, profile, total in parts:
                    sid = mig_slot_id(host, index, gi)
                    act = _wave(s, i, 20, 99.5) if i != 2 else None
                    slots.append(
                        Slot(
                            id=sid,
                            kind=SlotKind.MIG,
                            host=host,
                            gpu_uuid=uuid,
                            gpu_index=index,
                            gpu_name=gpu_name,
                            profile=profile,
                            gi_id=gi,
                            ci_id=0,
                            mem_used_mib=total * _wave(s, i + 1, 0.3, 0.97),
                            mem_total_mib=total,
                            activity_pct=act,
                            activity_metric=None
                            if act is None
                            else "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                        )
                    )
                    name = f"{models[i]}-{host}-gi{gi}"
                    backends.append(
                        Backend(
                            name=name,
                            slot_id=sid,
                            url=f"http://{host}:80{i:02d}",
                            model=models[i],
                            weight=[3.0, 3.0, 1.0, 3.0, 2.0, 1.0][i],
                            inflight=int(_wave(s, i, 0, 9)),
                            ready=True,
                            state=BackendState.DRAINED if i == 4 else BackendState.ACTIVE,
                        )
                    )
                    latency.append(
                        LatencyStats(
                            key=name,
                            req_per_s=_wave(s, i, 2, 30),
                            p50_ms=_wave(s, i, 200, 900),
                            p95_ms=_wave(s, i + 2, 600, 3200),
                            p99_ms=_wave(s, i, 900, 4000),
                            error_rate=0.001,
                            queue_ms=_wave(s, i, 1, 40),
                        )
                    )
                    i += 1
            h200 = f"GPU-{a}-1"
            gpus.append(
                Gpu(
                    uuid=h200,
                    host=a,
                    index=1,
                    name="NVIDIA H200",
                    mig_enabled=False,
                    util_pct=_wave(s, 7, 40, 80),
                    temperature_c=55.0,
                    power_w=512.0,
                    power_limit_w=700.0,
                    xid_watched=True,
                    thermal_slowdown=False,
                    power_capped=False,
                )
            )
            sid = gpu_slot_id(a, 1)
            slots.append(
                Slot(
                    id=sid,
                    kind=SlotKind.GPU,
                    host=a,
                    gpu_uuid=h200,
                    gpu_index=1,
                    gpu_name="NVIDIA H200",
                    profile="H200",
                    mem_used_mib=101_000,
                    mem_total_mib=143_771,
                    activity_pct=_wave(s, 7, 40, 80),
                    activity_metric="GPM SM_OCCUPANCY",
                )
            )
            backends.append(
                Backend(
                    name=f"llama-{a}",
                    slot_id=sid,
                    model="llama",
                    weight=4.0,
                    inflight=12,
                    ready=True,
                )
            )
            latency.append(LatencyStats(key=f"llama-{a}", req_per_s=11.0, p95_ms=1800.0))
            for v in (1, 2):
                vm = f"vm-{a}-{v}"
                sid = vm_slot_id(vm)
                slots.append(
                    Slot(
                        id=sid,
                        kind=SlotKind.VM,
                        host=f"kvm{v}{suffix}",
                        gpu_name="RTX 4090",
                        profile="RTX 4090",
                        gpu_index=0,
                        mem_used_mib=18_000,
                        mem_total_mib=24_564,
                        activity_pct=_wave(s, v, 10, 60),
                        activity_metric="nvidia-smi utilization",
                        vm=VmInfo(
                            name=vm,
                            state="running",
                            vcpus=16,
                            memory_mib=65536,
                            gpu_pci_addresses=("0000:41:00.0",),
                            mps=MpsState(True, 100.0, (("sd-a", 60.0), ("sd-b", 40.0))),
                        ),
                    )
                )
                for server, w in (("a", 3.0), ("b", 2.0)):
                    name = f"sd-{vm}-{server}"
                    backends.append(
                        Backend(
                            name=name,
                            slot_id=sid,
                            model="sd",
                            weight=w,
                            inflight=2,
                            ready=v == 1 or server == "a",
                        )
                    )
                    latency.append(LatencyStats(key=name, req_per_s=4.0, p95_ms=1200.0))
        queues = (
            QueueStats(
                stream="gen:queue",
                length=int(_wave(s, 0, 5, 400)),
                group="g1",
                pending=12,
                lag=int(_wave(s, 1, 0, 80)),
                oldest_age_s=0.4,
            ),
        )
        return Reading(
            source=self.name,
            health=self.health,
            taken_at=T0 + s,
            gpus=tuple(gpus),
            slots=tuple(slots),
            backends=tuple(backends),
            latency=tuple(latency),
            queues=queues,
            nodes=self.nodes,
            error=None if self.health is Health.OK else "refused",
            # what each backend's own /v2/health/ready answers (none for a backend whose
            # readiness the fleet does not say)
            ready_checks=tuple(
                ReadyCheck(b.name, b.ready, None if b.ready else "status 503")
                for b in backends
                if b.ready is not None
            ),
        )

    def _gpu(self, uuid: str, host: str, index: int, name: str, trouble: bool) -> Gpu:
        """A MIG-enabled A100 with its health; ``trouble`` (and gpu_trouble): a sick one."""
        sick = trouble and self.gpu_trouble
        return Gpu(
            uuid=uuid,
            host=host,
            index=index,
            name=name,
            mig_enabled=True,
            temperature_c=88.0 if sick else 61.0,
            power_w=398.0 if sick else 301.0,
            power_limit_w=400.0,
            xid_watched=True,
            xid_last=79 if sick else None,
            xid_at=T0 + 2 if sick else None,
            thermal_slowdown=sick,
            power_capped=sick,
        )

    def close(self) -> None:
        pass


def hub_with(source: HandSource, clock: FrozenClock) -> Hub:
    return Hub([source], refresh_s=1.0, clock=clock)


def advance(hub: Hub, source: HandSource, clock: FrozenClock, steps: int = 1) -> Snapshot:
    """Step the fleet and the clock ``steps`` times; return the newest snapshot."""
    snapshot: Snapshot | None = None
    for _ in range(steps):
        source.step += 1
        clock.now += 1.0
        hub.poll_once()
        snapshot = hub.tick()
    assert snapshot is not None
    return snapshot
