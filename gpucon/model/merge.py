"""Merge Readings from several sources into one view of the fleet, field by field.

Sources are given in priority order. For each entity (GPU by UUID, slot by (parent UUID,
GPU instance id) or id, backend by name, ...) the first source that knows a field wins; a
field a source does not know is ``None`` (or an empty tuple) and is filled from the next.
This is how a MIG slice gets its memory from NVML, its activity from DCGM via Prometheus and
its pod from Kubernetes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from gpucon.model.fleet import Backend, Gpu, LatencyStats, NodeInfo, QueueStats, Slot
from gpucon.model.reading import Reading

T = TypeVar("T")


def _is_unknown(value: object) -> bool:
    return value is None or value == ()


def overlay(base: T, extra: T) -> T:
    """``base`` with each unknown field filled from ``extra`` (both the same dataclass)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(base):  # type: ignore[arg-type]
        if _is_unknown(getattr(base, f.name)):
            value = getattr(extra, f.name)
            if not _is_unknown(value):
                changes[f.name] = value
    return dataclasses.replace(base, **changes) if changes else base  # type: ignore[type-var]


def merge_by_key(items: Iterable[T], key: Callable[[T], Hashable]) -> dict[Hashable, T]:
    """Items keyed by ``key``; a later item with a known key only fills unknown fields."""
    merged: dict[Hashable, T] = {}
    for item in items:
        k = key(item)
        existing = merged.get(k)
        merged[k] = item if existing is None else overlay(existing, item)
    return merged


def slot_join_key(slot: Slot) -> Hashable:
    """MIG slices and whole GPUs join on (parent UUID, GPU instance id); VMs on their id."""
    if slot.gpu_uuid is not None and slot.vm is None:
        return (slot.gpu_uuid, slot.gi_id)
    return slot.id


@dataclasses.dataclass(frozen=True, slots=True)
class MergedFleet:
    """Every source's readings merged into one view, keyed by id, with who told of what."""

    gpus: dict[str, Gpu]
    slots: dict[str, Slot]
    backends: dict[str, Backend]
    queues: dict[str, QueueStats]
    latency: dict[str, LatencyStats]
    nodes: dict[str, NodeInfo]
    # entity key ("slot:ID", "backend:NAME", "queue:STREAM", "gpu:UUID") -> sources that told of it
    origins: dict[str, frozenset[str]]


@functools.lru_cache(maxsize=16384)
def _netloc(url: str | None) -> str | None:
    if not url:
        return None
    try:
        return urlsplit(url).netloc or None
    except ValueError:
        return None


def attach_pods_by_ip(
    backends: dict[str, Backend], nodes: Iterable[NodeInfo]
) -> dict[str, Backend]:
    """Backends with no pod get the GPU pod whose IP is their url's host (Kubernetes)."""
    pod_by_ip = {ip: (ref, n.name) for n in nodes for ip, ref in n.gpu_pod_ips}
    if not pod_by_ip:
        return backends
    attached: dict[str, Backend] = {}
    for name, b in backends.items():
        host = _url_host(b.url) if b.pod is None else None
        hit = pod_by_ip.get(host) if host else None
        attached[name] = (
            b if hit is None else dataclasses.replace(b, pod=hit[0], node=b.node or hit[1])
        )
    return attached


@functools.lru_cache(maxsize=16384)
def _url_host(url: str | None) -> str | None:
    try:
        return urlsplit(url).hostname if url else None
    except ValueError:  # a malformed url from the registry matches no pod
        return None


def resolve_latency(
    latency: Iterable[LatencyStats], backends: dict[str, Backend]
) -> dict[str, LatencyStats]:
    """Latency by backend name; ``host:port`` keys map to the backend with that url."""
    by_netloc: dict[str, str] | None = None  # built only if some key is not a backend name
    resolved: dict[str, LatencyStats] = {}
    for stats in latency:
        name = stats.key
        if name not in backends:
            if by_netloc is None:
                by_netloc = {
                    loc: b.name for b in backends.values() if (loc := _netloc(b.url)) is not None
                }
            name = by_netloc.get(name, name)
            stats = dataclasses.replace(stats, key=name)
        existing = resolved.get(name)
        resolved[name] = stats if existing is None else overlay(existing, stats)
    return resolved


def merge_readings(readings: Sequence[Reading]) -> MergedFleet:
    """Merge readings given in priority order (the first source known wins per field)."""
    origins: dict[str, frozenset[str]] = {}
    single: dict[str, frozenset[str]] = {}  # one shared frozenset per source name

    def note(key: str, source: str) -> None:
        known = origins.get(key)
        if known is None:
            origins[key] = single.get(source) or single.setdefault(source, frozenset((source,)))
        elif source not in known:
            origins[key] = known | {source}

    gpus: list[Gpu] = []
    slots: list[Slot] = []
    backends: list[Backend] = []
    queues: list[QueueStats] = []
    latency: list[LatencyStats] = []
    nodes: list[NodeInfo] = []
    for r in readings:
        gpus.extend(r.gpus)
        slots.extend(r.slots)
        backends.extend(r.backends)
        queues.extend(r.queues)
        latency.extend(r.latency)
        nodes.extend(r.nodes)
        for g in r.gpus:
            note(f"gpu:{g.uuid}", r.source)
        for b in r.backends:
            note(f"backend:{b.name}", r.source)
        for q in r.queues:
            note(f"queue:{q.stream}", r.source)

    merged_slots: dict[str, Slot] = {}
    for s in merge_by_key(slots, slot_join_key).values():
        # a fragment that names the slot only by id (Kubernetes: no GPU UUID) joins the slot
        # with that id instead of replacing it
        existing = merged_slots.get(s.id)
        merged_slots[s.id] = s if existing is None else overlay(existing, s)
    # origins of slots: every source whose fragment joined into the merged slot
    join_to_id = {slot_join_key(s): s.id for s in merged_slots.values()}
    for r in readings:
        for s in r.slots:
            note(f"slot:{join_to_id.get(slot_join_key(s), s.id)}", r.source)

    merged_backends = {str(k): v for k, v in merge_by_key(backends, lambda b: b.name).items()}
    for b in merged_backends.values():
        if b.slot_id is not None:
            for src in origins.get(f"backend:{b.name}", ()):
                note(f"slot:{b.slot_id}", src)
    merged_nodes = {str(k): v for k, v in merge_by_key(nodes, lambda n: n.name).items()}
    merged_backends = attach_pods_by_ip(merged_backends, merged_nodes.values())
    return MergedFleet(
        gpus={str(k): v for k, v in merge_by_key(gpus, lambda g: g.uuid).items()},
        slots=merged_slots,
        backends=merged_backends,
        queues={str(k): v for k, v in merge_by_key(queues, lambda q: q.stream).items()},
        latency=resolve_latency(latency, merged_backends),
        nodes=merged_nodes,
        origins=origins,
    )
