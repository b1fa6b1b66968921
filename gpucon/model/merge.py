"""Merge Readings from several sources into one view of the fleet, field by field.

Sources are given in priority order. For each entity (GPU by UUID, slot by (parent UUID,
GPU instance id) or id, backend by name, ...) the first source that knows a field wins; a
field a source does not know is ``None`` (or an empty tuple) and is filled from the next.
This is how a MIG slice gets its memory from NVML, its activity from DCGM via Prometheus and
its pod from Kubernetes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import msgspec

from gpucon.model import columns
from gpucon.model.fleet import Backend, Gpu, LatencyStats, MpsState, NodeInfo, QueueStats, Slot
from gpucon.model.reading import Reading

T = TypeVar("T")
K = TypeVar("K")  # a column of the readings (ids, slot ids)


def _is_unknown(value: object) -> bool:
    return value is None or value == ()


def overlay(base: T, extra: T) -> T:
    """``base`` with each unknown field filled from ``extra`` (both the same record)."""
    changes: dict[str, Any] = {}
    for name in base.__struct_fields__:  # type: ignore[attr-defined]
        if _is_unknown(getattr(base, name)):
            value = getattr(extra, name)
            if not _is_unknown(value):
                changes[name] = value
    return msgspec.structs.replace(base, **changes) if changes else base  # type: ignore[type-var]


def merge_by_key(items: Iterable[T], key: Callable[[T], Hashable]) -> dict[Hashable, T]:
    """Items keyed by ``key``; a later item with a known key only fills unknown fields."""
    items = items if isinstance(items, (list, tuple)) else list(items)
    merged: dict[Hashable, T] = {key(item): item for item in items}
    if len(merged) == len(items):  # no two items share a key (one source): nothing to fill
        return merged
    merged = {}
    for item in items:
        k = key(item)
        existing = merged.get(k)
        merged[k] = item if existing is None else overlay(existing, item)
    return merged


class _KeyCache:
    """``"kind:ident"`` strings built once per entity: origins are noted for every entity
    of every reading each tick. Dropped whole when it outgrows any fleet (entities gone)."""

    LIMIT = 200_000

    def __init__(self) -> None:
        self.keys: dict[str, dict[str, str]] = {}

    def _cache(self, kind: str) -> dict[str, str]:
        cache = self.keys.get(kind)
        if cache is None or len(cache) > self.LIMIT:
            cache = self.keys[kind] = {}
        return cache

    def of(self, kind: str) -> Callable[[str], str]:
        cache = self._cache(kind)
        prefix = kind + ":"

        def key(ident: str) -> str:
            found = cache.get(ident)
            if found is None:
                found = cache[ident] = prefix + ident
            return found

        return key

    def many(self, kind: str, idents: Iterable[str]) -> list[str]:
        """The keys of ``idents``, in order (one list pass; a new entity's key made once)."""
        cache = self._cache(kind)
        idents = idents if isinstance(idents, list) else list(idents)
        keys = [cache.get(x) for x in idents]
        if None in keys:
            prefix = kind + ":"
            keys = [
                k if k is not None else cache.setdefault(x, prefix + x)
                for k, x in zip(keys, idents, strict=True)
            ]
        return keys  # type: ignore[return-value]


_KEYS = _KeyCache()


def slot_join_key(slot: Slot) -> Hashable:
    """MIG slices and whole GPUs join on (parent UUID, GPU instance id); VMs on their id."""
    if slot.gpu_uuid is not None and slot.vm is None:
        return (slot.gpu_uuid, slot.gi_id)
    return slot.id


class MergedFleet(msgspec.Struct, frozen=True):
    """Every source's readings merged into one view, keyed by id, with who told of what."""

    gpus: dict[str, Gpu]
    slots: dict[str, Slot]
    backends: dict[str, Backend]
    queues: dict[str, QueueStats]
    latency: dict[str, LatencyStats]
    nodes: dict[str, NodeInfo]
    # entity key ("slot:ID", "backend:NAME", "latency:NAME", "queue:STREAM", "gpu:UUID") ->
    # the sources that told of it
    origins: dict[str, frozenset[str]]
    # MPS daemons read directly, by the target the config names (the first source wins)
    mps: dict[str, MpsState] = msgspec.field(default_factory=dict)


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
            b if hit is None else msgspec.structs.replace(b, pod=hit[0], node=b.node or hit[1])
        )
    return attached


@functools.lru_cache(maxsize=16384)
def _url_host(url: str | None) -> str | None:
    try:
        return urlsplit(url).hostname if url else None
    except ValueError:  # a malformed url from the registry matches no pod
        return None


class _ServedModels:
    """Backends by where they are served: (url host:port, model) and url host:port alone."""

    def __init__(self, backends: Mapping[str, Backend], latency: Iterable[LatencyStats]) -> None:
        self.by_address_model: dict[tuple[str, str | None], str] = {}
        self.by_address: dict[str, list[Backend]] = {}
        for b in backends.values():
            loc = _netloc(b.url)
            if loc is not None:
                self.by_address_model.setdefault((loc, b.model), b.name)
                self.by_address.setdefault(loc, []).append(b)
        # the models each scrape address exports latency for
        self.models_at: dict[str, set[str | None]] = {}
        for stats in latency:
            self.models_at.setdefault(_latency_address(stats), set()).add(stats.model)

    def backend_for(self, stats: LatencyStats) -> str | None:
        """The backend one model's latency belongs to; None when no backend is (only) it.

        (address, model) first. Without a model label, or when the registry does not say the
        backend's model, the address alone decides, but only where it is unambiguous: one
        backend at that address, and one model's latency scraped from it. Guessing between
        two models would show one model's p95 (and its alerts) on the other.
        """
        address = _latency_address(stats)
        if stats.model is not None:
            hit = self.by_address_model.get((address, stats.model))
            if hit is not None:
                return hit
        at_address = self.by_address.get(address, [])
        if len(at_address) != 1 or len(self.models_at.get(address, ())) != 1:
            return None
        only = at_address[0]
        return only.name if stats.model is None or only.model is None else None


def _latency_address(stats: LatencyStats) -> str:
    return stats.address or stats.key


def unclaimed_latency_name(stats: LatencyStats) -> str:
    """The key of latency no backend claims: its address, and its model where it has one."""
    return stats.key if stats.model is None else f"{stats.key}/{stats.model}"


def latency_name_resolver(
    backends: Mapping[str, Backend], latency: Iterable[LatencyStats]
) -> Callable[[LatencyStats], str]:
    """Maps one model's latency (from ``latency``, every reading's) to its key in the fleet.

    A key that names a backend (a ``backend`` label, the simulator) stays; else the backend
    served at (host:port, model) (see _ServedModels.backend_for); else unclaimed_latency_name.
    """
    everything = latency
    served: _ServedModels | None = None  # built only if some key is not a backend name

    def resolve(stats: LatencyStats) -> str:
        nonlocal served
        if stats.key in backends:
            return stats.key
        if served is None:
            served = _ServedModels(backends, everything)
        return served.backend_for(stats) or unclaimed_latency_name(stats)

    return resolve


def resolve_latency(
    latency: Iterable[LatencyStats], backends: Mapping[str, Backend]
) -> dict[str, LatencyStats]:
    """Latency by backend name: a ``backend`` label names it, else (host:port, model).

    Latency that no backend claims stays under its address (and model).
    """
    pending = list(latency)
    name_of = latency_name_resolver(backends, pending)
    resolved: dict[str, LatencyStats] = {}
    for stats in pending:
        name = name_of(stats)
        if name != stats.key:
            stats = msgspec.structs.replace(stats, key=name)
        existing = resolved.get(name)
        resolved[name] = stats if existing is None else overlay(existing, stats)
    return resolved


def _by(items: list[T], keys: list[str]) -> dict[str, T]:
    """``merge_by_key`` on one string field, ``keys`` each item's (built in C when no two
    items share it)."""
    merged: dict[str, T] = dict(zip(keys, items, strict=True))
    if len(merged) == len(items):
        return merged
    merged = {}
    for k, item in zip(keys, items, strict=True):
        existing = merged.get(k)
        merged[k] = item if existing is None else overlay(existing, item)
    return merged


def _all(lists: list[list[K]]) -> list[K]:
    """One list of the readings' lists, in order (the one list itself when one reading)."""
    return lists[0] if len(lists) == 1 else [x for part in lists for x in part]


# mutable and private to one merge: a plain class (defining a dataclass costs ~0.5 ms of every
# console's start, and nothing compares these)
class _Told:
    """What one reading names, by kind, in its order: the ids the origins are noted for."""

    __slots__ = ("backend_slots", "backends", "gpus", "latency", "queues", "source")

    def __init__(
        self,
        source: str,
        gpus: list[str],
        backends: list[str],
        backend_slots: list[str | None],
        queues: list[str],
        latency: list[str],
    ) -> None:
        self.source = source
        self.gpus = gpus
        self.backends = backends
        self.backend_slots = backend_slots
        self.queues = queues
        self.latency = latency


# the shape of the last readings merged (who named which entity, how slots joined, which
# backend serves on which slot) and the origins it gave: a fleet of the same shape has the same
# origins, and noting them is most of a merge at thousands of entities (one dict of all of them)
_LAST_ORIGINS: list[tuple[object, dict[str, frozenset[str]]]] = []


def _go_on() -> None:
    """``give_way`` when nothing waits."""


def merge_readings(
    readings: Sequence[Reading], give_way: Callable[[], object] = _go_on
) -> MergedFleet:
    """Merge readings given in priority order (the first source known wins per field);
    ``give_way`` is called between the merge's steps (the hub's: a key goes first)."""
    gpus: list[Gpu] = []
    slots: list[Slot] = []
    backends: list[Backend] = []
    queues: list[QueueStats] = []
    latency: list[LatencyStats] = []
    nodes: list[NodeInfo] = []
    mps: dict[str, MpsState] = {}
    told: list[_Told] = []
    for r in readings:
        for target, state in r.mps:
            mps.setdefault(target, state)
        gpus.extend(r.gpus)
        slots.extend(r.slots)
        backends.extend(r.backends)
        queues.extend(r.queues)
        latency.extend(r.latency)
        nodes.extend(r.nodes)
        told.append(
            _Told(
                r.source,
                [g.uuid for g in r.gpus],
                [b.name for b in r.backends],
                [b.slot_id for b in r.backends],
                [q.stream for q in r.queues],
                [lat.key for lat in r.latency],
            )
        )

    give_way()
    # each fragment's join key, worked out once (it is used three times): slot_join_key
    join_keys: list[Hashable] = [
        (s.gpu_uuid, s.gi_id) if s.gpu_uuid is not None and s.vm is None else s.id for s in slots
    ]
    by_join: dict[Hashable, Slot] = dict(zip(join_keys, slots, strict=True))
    if len(by_join) != len(slots):
        by_join = {}
        for k, s in zip(join_keys, slots, strict=True):
            existing = by_join.get(k)
            by_join[k] = s if existing is None else overlay(existing, s)
    merged_slots: dict[str, Slot] = {s.id: s for s in by_join.values()}
    if len(merged_slots) != len(by_join):
        merged_slots = {}
        for s in by_join.values():
            # a fragment that names the slot only by id (Kubernetes: no GPU UUID) joins the
            # slot with that id instead of replacing it
            existing = merged_slots.get(s.id)
            merged_slots[s.id] = s if existing is None else overlay(existing, s)
    give_way()
    merged_backends = _by(backends, _all([t.backends for t in told]))
    merged_nodes = _by(nodes, [n.name for n in nodes])
    unique = len(merged_backends) == len(backends)  # the readings' records, in their order
    merged_backends = attach_pods_by_ip(merged_backends, merged_nodes.values())
    if unique:  # a pod attached keeps its slot: the slot ids read above are the merged ones'
        columns.note_slot_ids(merged_backends, _all([t.backend_slots for t in told]))
    give_way()
    lat_keys = _all([t.latency for t in told])
    named = set(lat_keys)
    if len(named) == len(lat_keys) and named <= merged_backends.keys():
        # every latency names its backend (a backend label, the simulator): keyed as it is,
        # and the origins follow from what the readings name and how the slots joined
        resolved = dict(zip(lat_keys, latency, strict=True))
        shape = (
            [(t.source, t.gpus, t.backends, t.backend_slots, t.queues, t.latency) for t in told],
            join_keys,
            list(merged_slots) if len(merged_slots) == len(slots) else [s.id for s in slots],
        )
        last = _LAST_ORIGINS[0] if _LAST_ORIGINS else None
        if last is not None and last[0] == shape:
            origins = last[1]
        else:
            origins = _origins(readings, told, join_keys, by_join, merged_backends, None)
            _LAST_ORIGINS[:] = [(shape, origins)]
    else:
        latency_name = latency_name_resolver(merged_backends, latency)
        for t, r in zip(told, readings, strict=True):
            t.latency = [latency_name(lat) for lat in r.latency]
        origins = _origins(readings, told, join_keys, by_join, merged_backends, latency_name)
        resolved = resolve_latency(latency, merged_backends)
    give_way()
    return MergedFleet(
        gpus=_by(gpus, _all([t.gpus for t in told])),
        slots=merged_slots,
        backends=merged_backends,
        queues=_by(queues, _all([t.queues for t in told])),
        latency=resolved,
        nodes=merged_nodes,
        origins=origins,
        mps=mps,
    )


def _origins(
    readings: Sequence[Reading],
    told: list[_Told],
    join_keys: list[Hashable],
    by_join: Mapping[Hashable, Slot],
    merged_backends: Mapping[str, Backend],
    latency_name: Callable[[LatencyStats], str] | None,
) -> dict[str, frozenset[str]]:
    """Entity key -> the sources that told of it (``MergedFleet.origins``); ``told[i].latency``
    holds the names reading ``i``'s latency was resolved to."""
    origins: dict[str, frozenset[str]] = {}
    single: dict[str, frozenset[str]] = {}  # one shared frozenset per source name

    def note_all(keys: list[str], source: str) -> None:
        mine = single.get(source) or single.setdefault(source, frozenset((source,)))
        if origins.keys().isdisjoint(keys):  # the first source to tell of these (in C)
            origins.update(dict.fromkeys(keys, mine))
            return
        get = origins.get
        for key in keys:
            known = get(key)
            if known is None:
                origins[key] = mine
            elif source not in known:
                origins[key] = known | mine

    many = _KEYS.many
    for t in told:
        note_all(many("gpu", t.gpus), t.source)
        note_all(many("backend", t.backends), t.source)
        note_all(many("queue", t.queues), t.source)
    # origins of slots: every source whose fragment joined into the merged slot
    if len(readings) == 1 and len(by_join) == len(join_keys):
        note_all(many("slot", [s.id for s in readings[0].slots]), readings[0].source)
    else:
        join_to_id = {k: s.id for k, s in by_join.items()}
        i = 0
        for r in readings:
            n = len(r.slots)
            ids = [
                join_to_id.get(k, s.id) for k, s in zip(join_keys[i : i + n], r.slots, strict=True)
            ]
            note_all(many("slot", ids), r.source)
            i += n
    # a backend's sources told of its slot too
    serving = [b for b in merged_backends.values() if b.slot_id is not None]
    by_sources: dict[frozenset[str], list[str]] = {}
    get = origins.get
    for by, slot in zip(
        many("backend", [b.name for b in serving]),
        many("slot", [b.slot_id for b in serving]),  # type: ignore[misc]
        strict=True,
    ):
        by_sources.setdefault(get(by, frozenset()), []).append(slot)
    for sources, keys in by_sources.items():
        for src in sources:
            # most were told of by the same source already: only the rest are noted
            note_all([k for k in keys if src not in get(k, ())], src)
    for t in told:
        note_all(many("latency", t.latency), t.source)
    return origins
