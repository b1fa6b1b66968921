"""Co-tenants: compute processes on a slot that none of the slot's backends accounts for.

A training job inside the VM, a notebook on the slice, another MPS client: the slot's
capacity is being taken by someone the scheduler does not see. Processes named like an
inference server or the MPS daemon belong to the backends; others count only when the slot
shows more processes than it has backends, so a backend whose server runs as
``python3 serve.py`` is not its own noisy neighbour.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucon.model.fleet import ComputeProcess

# process names that are the serving stack itself
SERVER_PROCESS_MARKERS = (
    "tritonserver",
    "nvidia-cuda-mps",
    "vllm",
    "text-generation",
    "torchserve",
    "sglang",
    "ray::",
)


def is_server(process: ComputeProcess) -> bool:
    name = (process.name or "").lower()
    return any(marker in name for marker in SERVER_PROCESS_MARKERS)


def foreign_processes(
    processes: Sequence[ComputeProcess], backends_on_slot: int
) -> tuple[ComputeProcess, ...]:
    """The processes none of ``backends_on_slot`` backends accounts for (cheap when none:
    a slot with no more processes than backends is decided by the count alone)."""
    serving = max(1, backends_on_slot)
    if len(processes) <= serving:
        return ()
    others = [p for p in processes if p.name is not None and not is_server(p)]
    # the extra processes: those not named like a server, at most as many as are extra
    return tuple(others[: len(processes) - serving])


def foreign_memory_mib(foreign: Sequence[ComputeProcess]) -> float:
    """Memory the co-tenants hold (an unknown size counts 0)."""
    return sum(p.used_memory_mib or 0.0 for p in foreign)
