"""What a re-slice plan reads from the snapshot: the GPU, its instances and backends, which
backend goes to which new instance, and the capacity each model has before and after.

Backends are moved a slot at a time: the backends on one old slot (one server, several
models) go together to one new instance, of the same profile where the new layout has one,
else to the largest left. A group with no instance left stays drained; a new instance with no
group is named, so the operator knows where to start a server. Pure: no IO.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gpucon.errors import MAX_NAME_CHARS, BadParams, bounded_text, shown
from gpucon.model.fleet import Backend, Gpu, Slot, SlotKind
from gpucon.model.ids import parse_slot_id
from gpucon.model.mig_placement import PlacedInstance
from gpucon.model.snapshot import Snapshot

MIB_PER_GIB = 1024.0


def gpu_name(gpu: Gpu) -> str:
    """The name an operator types for a GPU: ``host/gpuN`` (its whole-GPU slot id)."""
    return f"{gpu.host}/gpu{gpu.index}"


def find_gpu(snapshot: Snapshot, wanted: object) -> Gpu:
    """The GPU ``wanted`` names (``host/gpuN`` or its UUID); BadParams naming ``gpu``."""
    if not isinstance(wanted, str) or not wanted.strip():
        raise BadParams("gpu", f"expected a GPU like node-a/gpu0 or its UUID, got {shown(wanted)}")
    bounded_text("gpu", wanted, MAX_NAME_CHARS)
    text = wanted.strip()
    for gpu in snapshot.gpus.values():
        if text in (gpu_name(gpu), gpu.uuid):
            return gpu
    known = ", ".join(sorted(gpu_name(g) for g in snapshot.gpus.values())[:12]) or "none"
    raise BadParams("gpu", f"unknown GPU {shown(text)} (known: {known})")


def mig_slots(snapshot: Snapshot, gpu: Gpu) -> list[Slot]:
    """The GPU's MIG instances as the snapshot shows them, by GPU-instance id."""
    slots = [
        s for s in snapshot.slots.values() if s.gpu_uuid == gpu.uuid and s.kind is SlotKind.MIG
    ]
    return sorted(slots, key=lambda s: (s.gi_id if s.gi_id is not None else 1 << 30, s.id))


def _on_gpu(snapshot: Snapshot, gpu: Gpu, backend: Backend) -> bool:
    slot = snapshot.slots.get(backend.slot_id or "")
    if slot is not None:
        return slot.gpu_uuid == gpu.uuid
    if not backend.slot_id:
        return False
    try:  # a slot gone from the snapshot (destroyed by an interrupted re-slice): by its id
        parsed = parse_slot_id(backend.slot_id)
    except ValueError:
        return False
    return parsed.kind in ("mig", "gpu") and (parsed.host, parsed.gpu_index) == (
        gpu.host,
        gpu.index,
    )


def gpu_backends(snapshot: Snapshot, gpu: Gpu) -> tuple[Backend, ...]:
    """Every backend registered on the GPU (its slots, or slot ids naming it), by name."""
    found = [b for b in snapshot.backends.values() if _on_gpu(snapshot, gpu, b)]
    return tuple(sorted(found, key=lambda b: b.name))


@dataclass(frozen=True, slots=True)
class Assignment:
    """Which new instance (index into the layout's placements) each slot group goes to."""

    by_backend: dict[str, int]  # backend -> new instance index
    left_out: tuple[str, ...]  # backends with no instance: they stay drained
    empty: tuple[int, ...]  # new instances with no backend


def assign(
    snapshot: Snapshot, backends: Sequence[Backend], placed: Sequence[PlacedInstance]
) -> Assignment:
    groups: dict[str, list[str]] = defaultdict(list)
    for b in backends:
        groups[b.slot_id or f"?{b.name}"].append(b.name)

    def size(slot_id: str) -> tuple[int, str]:
        slot = snapshot.slots.get(slot_id)
        return (-(slot.sm_count or 0) if slot else 0, slot_id)

    order = sorted(groups, key=size)
    free = list(range(len(placed)))
    chosen: dict[str, int] = {}
    for slot_id in order:  # the same profile first: its server fits as it did
        slot = snapshot.slots.get(slot_id)
        same = next((i for i in free if slot and placed[i].profile.name == slot.profile), None)
        if same is not None:
            chosen[slot_id] = same
            free.remove(same)
    for slot_id in order:  # then the largest instance left
        if slot_id in chosen or not free:
            continue
        best = max(free, key=lambda i: (placed[i].profile.sm_count, -i))
        chosen[slot_id] = best
        free.remove(best)
    by_backend = {n: chosen[s] for s, names in groups.items() if s in chosen for n in names}
    left = tuple(sorted(n for s, names in groups.items() if s not in chosen for n in names))
    return Assignment(by_backend, left, tuple(free))


def capacity_lines(
    snapshot: Snapshot,
    backends: Sequence[Backend],
    placed: Sequence[PlacedInstance],
    assignment: Assignment,
    where: str,
) -> list[str]:
    """Per model served on the GPU: SMs and memory before → after (a slot shared by n
    backends counts 1/n for each)."""
    before: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    after: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    sharing: dict[str, int] = defaultdict(int)
    for b in backends:
        sharing[b.slot_id or ""] += 1
    on_new: dict[int, int] = defaultdict(int)
    for index in assignment.by_backend.values():
        on_new[index] += 1
    for b in backends:
        model = b.model or "(no model)"
        slot = snapshot.slots.get(b.slot_id or "")
        if slot is not None:
            n = sharing[b.slot_id or ""]
            before[model][0] += (slot.sm_count or 0) / n
            before[model][1] += (slot.mem_total_mib or 0.0) / n
        new = assignment.by_backend.get(b.name)
        after.setdefault(model, [0.0, 0.0])  # a model left with nothing is listed with 0
        if new is not None:
            profile = placed[new].profile
            after[model][0] += profile.sm_count / on_new[new]
            after[model][1] += profile.memory_mib / on_new[new]
    lines = []
    for model in sorted(set(before) | set(after)):
        b_sm, b_mem = before[model]
        a_sm, a_mem = after[model]
        lines.append(
            f"capacity of {model} on {where}: {b_sm:.0f} → {a_sm:.0f} SMs, "
            f"{b_mem / MIB_PER_GIB:.1f} → {a_mem / MIB_PER_GIB:.1f} GiB"
        )
    return lines
