"""What the slot detail says of the slot itself and of its GPU's and node's health, as Texts:
the facts each source gave (a stale one marked with its age), and why a slot has none (only
the registry names it, or it is gone). Untrusted names go through ``safe_text``."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from gpucon.model.fleet import Health, Slot
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt, health_text
from gpucon.widgets.safe_text import safe


def field(text: Text, label: str, value: object, width: int = 48) -> None:
    text.append(f"{label:>14} ", style="dim")
    text.append_text(safe(fmt.NA if value is None or value == "" else value, width))
    text.append("\n")


def _stale_note(ages: Mapping[str, float], *fields: str) -> str:
    age = max((ages[f] for f in fields if f in ages), default=None)
    return "" if age is None else f"  [stale {fmt.age(age)}]"


def absent_slot(snapshot: Snapshot, slot_id: str) -> Text:
    """Why a slot has no facts: only the registry names it (no GPU source reports it: the lab,
    a fleet without NVML/DCGM), or it is gone; and the sources down or stale now, if any."""
    backends = snapshot.backends_on(slot_id)
    text = Text(style="italic")
    if backends:
        text.append("  no GPU source (NVML, DCGM or libvirt) reports this slot; the registry ")
        text.append("places ")
        text.append_text(safe(", ".join(b.name for b in backends[:3]), 60))
        text.append(" on it" if len(backends) <= 3 else f" (+{len(backends) - 3}) on it")
    else:
        text.append("  not in the current snapshot: no source reports it now")
    down = sorted(
        name
        for name, status in snapshot.sources.items()
        if status.health is Health.DOWN or name in snapshot.staleness.sources
    )
    if down:
        text.append(f" ({', '.join(down)} down or stale)")
    return text


def slot_facts(
    slot: Slot | None,
    slot_id: str,
    ages: Mapping[str, float] | None = None,
    absent: Text | None = None,
) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    if slot is None:
        text.append_text(safe(slot_id, 80, "bold"))
        text.append_text(absent or Text("  not in the current snapshot", style="italic"))
        text.append("\n")
        return text
    text.append_text(safe(slot.id, 80, "bold"))
    text.append(f"  {slot.kind.value.upper()}\n", style="bold")
    ages = ages or {}
    metric = slot.activity_metric or "n/a: no source reports activity for this slot"
    stale = _stale_note(ages, "activity_pct")
    field(text, "activity", f"{fmt.pct(slot.activity_pct)} ({metric}){stale}", 100)
    stale = _stale_note(ages, "mem_used_mib", "mem_total_mib")
    field(text, "memory GiB", fmt.mem(slot.mem_used_mib, slot.mem_total_mib) + stale)
    field(text, "host", slot.host)
    field(
        text,
        "GPU",
        f"{slot.gpu_index if slot.gpu_index is not None else '?'} "
        f"{slot.gpu_name or ''} {slot.gpu_uuid or ''}".strip(),
    )
    field(text, "profile", slot.profile)
    if slot.gi_id is not None:
        field(text, "GI / CI", f"{slot.gi_id} / {fmt.NA if slot.ci_id is None else slot.ci_id}")
    field(text, "SMs", slot.sm_count)
    if slot.pod or slot.node:
        field(text, "pod / node", f"{slot.pod or fmt.NA} / {slot.node or fmt.NA}")
    if slot.vm is not None:
        vm = slot.vm
        field(
            text,
            "VM",
            f"{vm.name} ({vm.state or fmt.NA}), {fmt.count(vm.vcpus)} vCPU, "
            f"{fmt.gib(vm.memory_mib)} GiB",
        )
        field(text, "passthrough", ", ".join(vm.gpu_pci_addresses) or None)
        if vm.mps is not None:
            mps = vm.mps
            daemon = {True: "running", False: "STOPPED", None: fmt.NA}[mps.daemon_running]
            field(text, "MPS daemon", f"{daemon}, default {fmt.pct(mps.default_thread_pct)}")
            for server, share in mps.thread_pct_by_server:
                field(text, "MPS share", f"{server}: {fmt.pct(share)}")
    if slot.processes:
        text.append("\n     processes\n", style="bold")
        for p in slot.processes[:20]:
            text.append(f"{p.pid:>14} ")
            text.append_text(safe(p.name or fmt.NA, 40))
            text.append(f"  {fmt.gib(p.used_memory_mib)} GiB\n")
    return text


def health_facts(slot: Slot | None, snapshot: Snapshot) -> Text:
    """The slot's GPU health and its node's state; "n/a" for what no source reports."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if slot is None:
        return text
    gpu = snapshot.gpus.get(slot.gpu_uuid) if slot.gpu_uuid else None
    text.append("    GPU health\n", style="bold")
    if gpu is None:
        field(text, "GPU", "n/a: no source reports this slot's GPU")
    else:
        pct = gpu.power_pct
        of_limit = "" if pct is None else f" ({pct:.0f}% of limit)"
        field(text, "temperature", health_text.temperature(gpu))
        field(text, "power", f"{health_text.power(gpu)}{of_limit}")
        field(text, "GPU util", fmt.pct(gpu.util_pct))
        field(text, "last XID", health_text.xid(gpu, snapshot.taken_at, long=True), 90)
        field(text, "clocks", health_text.clocks(gpu))
    # the slot's node: as Kubernetes placed it or its backends, else the node named like
    # its host (a Kubernetes node's name is usually the host name NVML and DCGM report)
    backend_nodes = [b.node for b in snapshot.backends_on(slot.id) if b.node]
    node_name = slot.node or (backend_nodes[0] if backend_nodes else None) or slot.host
    node = snapshot.nodes.get(node_name) if node_name else None
    if node is not None:
        since = snapshot.mig_pending_since.get(node.name)
        text.append("    node\n", style="bold")
        field(text, "node", node.name)
        field(text, "MIG config", node.mig_config)
        unseen = node.name in snapshot.mig_pending_unseen
        field(text, "MIG state", health_text.node_state(node, since, snapshot.taken_at, unseen))
        field(text, "scheduling", "CORDONED (unschedulable)" if node.unschedulable else "open")
    mps_facts(text, slot, snapshot)
    return text


def mps_target_of(slot: Slot, snapshot: Snapshot) -> str | None:
    """The MPS daemon target (as the config names it) that serves ``slot``, if one is read."""
    names = [slot.id, slot.gpu_uuid, slot.vm.name if slot.vm else None]
    if slot.host is not None and slot.gpu_index is not None:
        names.append(f"{slot.host}/gpu{slot.gpu_index}")
    return next((n for n in names if n is not None and n in snapshot.mps), None)


def mps_facts(text: Text, slot: Slot, snapshot: Snapshot) -> None:
    """The MPS daemon as read from it (``gpucon.sources.mps``): up or not, its servers, their
    clients and shares, the defaults."""
    target = mps_target_of(slot, snapshot)
    if target is None:
        return
    mps = snapshot.mps[target]
    text.append("    MPS daemon (read from it)\n", style="bold")
    if not mps.daemon_running:
        field(text, "daemon", f"NOT RUNNING ({target})")
        return
    field(text, "daemon", f"running ({target})")
    pinned = mps.pinned_mem_limit or fmt.NA
    field(text, "default", f"{fmt.pct(mps.default_thread_pct)} of SMs, pinned {pinned}")
    shares = dict(mps.thread_pct_by_server)
    clients = dict(mps.clients_by_server)
    if not clients and not shares:
        field(text, "servers", "none (no client has connected)")
    for server in sorted(set(shares) | set(clients)):
        pids = clients.get(server, ())
        listed = ", ".join(str(p) for p in pids[:6]) + (" ..." if len(pids) > 6 else "")
        field(
            text,
            f"server {server}",
            f"{fmt.pct(shares.get(server))} of SMs, {len(pids)} client(s) {listed}".strip(),
            90,
        )
