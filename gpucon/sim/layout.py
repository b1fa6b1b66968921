"""What the simulated fleet is made of: the default demo fleet, and N-GPU fleets for benchmarks.

Default: ``node-a`` A100-80GB as 3g.40gb + 2g.20gb (SDXL) + 1g.10gb (SD1.5); ``node-b`` A100-40GB as
3g.20gb (SD1.5) + 2g.10gb (BERT) + 1g.5gb (ResNet-50), and two RTX 4090s passed through to the
VMs ``vm-b-1``/``vm-b-2``, each running SDXL and SD1.5 under MPS at 60/40; ``node-c`` one
whole H200 running SDXL. ``size=N`` builds hosts of 8 GPUs: mostly MIG hosts cut 7×1g, and
one host in 16 of RTX 4090 VMs (512 GPUs give about 3,400 slots, 2,048 about 13,700).

Every MIG layout is placed as NVML would place it (``model.mig_placement.fit_layout``: each
instance at a start its profile allows, none overlapping), and one NVML would refuse is refused
here: an A100-80GB has 8 memory slices and a 3g.40gb covers 4, so 2 × 3g.40gb + 1g.10gb, which
the demo once showed, cannot exist.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

import msgspec

from gpucon.model.fleet import ComputeProcess, MpsState, SlotKind, VmInfo
from gpucon.model.ids import gpu_slot_id, vm_slot_id
from gpucon.model.mig_layout import LayoutItem
from gpucon.model.mig_placement import fit_layout
from gpucon.sim.catalog import (
    A100_40GB,
    A100_80GB,
    CONTEXT_MIB,
    H200,
    MODELS,
    RTX_4090,
    GpuType,
    concurrency,
    mig_profile,
    service_time_s,
)
from gpucon.sim.parts import SimBackend, SimGpu, SimSlot, mig_slot

MAX_SIZE = 2048
GPUS_PER_HOST = 8


class FleetParts(msgspec.Struct, frozen=True):
    """The simulated fleet's GPUs, slots and backends, as built from a layout."""

    gpus: tuple[SimGpu, ...]
    slots: tuple[SimSlot, ...]
    backends: tuple[SimBackend, ...]


@functools.cache
def placed_starts(gpu_type: GpuType, layout: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """Where each instance of ``layout`` goes on ``gpu_type`` (start, size), in the layout's
    order; ValueError naming the layout and why NVML would refuse it. Kept per layout: a sized
    fleet places the same 7 × 1g thousands of times."""
    table = gpu_type.profiles
    if table is None:
        raise ValueError(f"GPU {gpu_type.name!r} has no MIG profiles")
    fit = fit_layout(table, [LayoutItem(name) for name in layout], gpu_type.name)
    if not fit.ok:
        raise ValueError(f"MIG layout {' + '.join(layout)}: {'; '.join(fit.problems)}")
    free: dict[str, list[tuple[int, int]]] = {}
    for p in fit.placed:  # in start order: equal profiles take their starts in turn
        assert p.start is not None and p.size is not None  # the sim's tables have placements
        free.setdefault(p.profile.name, []).append((p.start, p.size))
    return tuple(free[name].pop(0) for name in layout)


class _Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.gpus: list[SimGpu] = []
        self.slots: list[SimSlot] = []
        self.backends: list[SimBackend] = []

    def uuid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def gpu(self, host: str, index: int, gpu_type: GpuType, mig: bool) -> SimGpu:
        gpu = SimGpu(self.uuid(), host, index, gpu_type, mig)
        self.gpus.append(gpu)
        return gpu

    def serve(
        self,
        slot: SimSlot,
        name: str,
        url: str,
        model_name: str,
        sm_share: float,
    ) -> None:
        model = MODELS[model_name]
        speed = slot.gpu.gpu_type.speed_per_sm
        backend = SimBackend(
            name,
            slot,
            url,
            model,
            1.0,
            service_time_s(model, sm_share, speed),
            concurrency(model, sm_share),
        )
        slot.backends.append(backend)
        self.backends.append(backend)
        pid = self.rng.randrange(2000, 60000)
        slot.processes = (
            *slot.processes,
            ComputeProcess(pid, "tritonserver", CONTEXT_MIB + model.weights_mib),
        )

    def mig_gpu(
        self,
        host: str,
        tag: str,
        index: int,
        gpu_type: GpuType,
        layout: Sequence[str],
        models: Sequence[str],
    ) -> None:
        starts = placed_starts(gpu_type, tuple(layout))
        gpu = self.gpu(host, index, gpu_type, mig=True)
        for gi_id, (profile_name, model) in enumerate(zip(layout, models, strict=True), start=1):
            profile = mig_profile(gpu_type, profile_name)
            slot = mig_slot(gpu, gi_id, profile)
            slot.placement = starts[gi_id - 1]
            gpu.slots.append(slot)
            self.slots.append(slot)
            url = f"http://{host}:{8000 + 10 * index + gi_id}"
            self.serve(slot, f"{model}-{tag}{index}-gi{gi_id}", url, model, profile.sm_count)

    def whole_gpu(self, host: str, tag: str, index: int, gpu_type: GpuType, model: str) -> None:
        gpu = self.gpu(host, index, gpu_type, mig=False)
        slot = SimSlot(
            gpu_slot_id(host, index),
            SlotKind.GPU,
            gpu,
            gpu_type.name,
            gpu_type.sm_count,
            float(gpu_type.memory_mib),
        )
        gpu.slots.append(slot)
        self.slots.append(slot)
        url = f"http://{host}:{8000 + 10 * index}"
        self.serve(slot, f"{model}-{tag}{index}", url, model, gpu_type.sm_count)

    def vm_gpu(
        self, host: str, index: int, vm_name: str, servers: Sequence[tuple[str, float]]
    ) -> None:
        gpu_type = RTX_4090
        gpu = self.gpu(host, index, gpu_type, mig=False)
        split = tuple((f"{model}-{vm_name}", pct) for model, pct in servers)
        vm = VmInfo(
            name=vm_name,
            state="running",
            vcpus=16,
            memory_mib=65536.0,
            host=host,
            gpu_pci_addresses=(f"0000:{0x41 + index:02x}:00.0",),
            gpu_uuid=gpu.uuid,
            mps=MpsState(True, 100.0, split, "0=20G"),
        )
        slot = SimSlot(
            vm_slot_id(vm_name),
            SlotKind.VM,
            gpu,
            gpu_type.name,
            gpu_type.sm_count,
            float(gpu_type.memory_mib),
            vm=vm,
        )
        gpu.slots.append(slot)
        self.slots.append(slot)
        for port, ((model, pct), (name, _)) in enumerate(zip(servers, split, strict=True)):
            sms = gpu_type.sm_count * pct / 100.0
            self.serve(slot, name, f"http://{vm_name}:{8000 + port}", model, sms)

    def parts(self) -> FleetParts:
        return FleetParts(tuple(self.gpus), tuple(self.slots), tuple(self.backends))


VM_SERVERS = (("sdxl", 60.0), ("sd15", 40.0))


def default_fleet(rng: random.Random) -> FleetParts:
    b = _Builder(rng)
    b.mig_gpu(
        "node-a", "a", 0, A100_80GB, ("3g.40gb", "2g.20gb", "1g.10gb"), ("sdxl", "sdxl", "sd15")
    )
    b.mig_gpu(
        "node-b",
        "b",
        0,
        A100_40GB,
        ("3g.20gb", "2g.10gb", "1g.5gb"),
        ("sd15", "bert-base", "resnet50"),
    )
    b.vm_gpu("node-b", 1, "vm-b-1", VM_SERVERS)
    b.vm_gpu("node-b", 2, "vm-b-2", VM_SERVERS)
    b.whole_gpu("node-c", "c", 0, H200, "sdxl")
    return b.parts()


# host kinds of a sized fleet, in a cycle of 16 hosts (one of them a host of VMs)
_HOST_CYCLE = ("a100-80", "h200", "a100-40", "a100-80", "h200", "a100-80", "a100-40", "h200") * 2
_HOST_CYCLE = (*_HOST_CYCLE[:-1], "vm-4090")
_MIG_PLANS: dict[str, tuple[GpuType, str, tuple[str, ...]]] = {
    "a100-80": (A100_80GB, "1g.10gb", ("sd15", "bert-base", "resnet50")),
    "a100-40": (A100_40GB, "1g.5gb", ("bert-base", "resnet50")),
    "h200": (H200, "1g.18gb", ("sdxl", "sd15")),
}


def sized_fleet(size: int, rng: random.Random) -> FleetParts:
    """``size`` GPUs on hosts of 8; raises ValueError naming ``size`` when out of range."""
    if not 1 <= size <= MAX_SIZE:
        raise ValueError(f"size: expected 1 to {MAX_SIZE} GPUs, got {size}")
    b = _Builder(rng)
    for n in range(size):
        host_no, index = divmod(n, GPUS_PER_HOST)
        kind = _HOST_CYCLE[host_no % len(_HOST_CYCLE)]
        host = f"gpu-{host_no:03d}"
        if kind == "vm-4090":
            b.vm_gpu(host, index, f"vm-{host_no:03d}-{index}", VM_SERVERS)
            continue
        gpu_type, profile, models = _MIG_PLANS[kind]
        layout = (profile,) * 7
        chosen = tuple(models[(index + gi) % len(models)] for gi in range(7))
        b.mig_gpu(host, f"n{host_no:03d}g", index, gpu_type, layout, chosen)
    return b.parts()
