"""The samples the history rings keep each tick, taken from the merged fleet.

One sample per series (see model.history for the keys); ``slot:ID:cotenant_mem`` only while
the slot has co-tenants (model.cotenants), so a calm fleet pays nothing for it. A value that
is stale now is sampled as ``None``, a gap, so plots, sparklines and alert windows stop where
fresh data stops instead of repeating the last value.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Mapping, Sequence

from gpucon.model import columns
from gpucon.model.cotenants import foreign_memory_mib, foreign_processes
from gpucon.model.history import Block, Sample
from gpucon.model.history_blocks import split_key
from gpucon.model.merge import MergedFleet
from gpucon.model.staleness import FRESH, Staleness

# history series -> the (entity kind, field) it samples: a stale value is appended as a gap
_SERIES_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "slot": (
        ("activity", "activity_pct"),
        ("mem_used", "mem_used_mib"),
        ("cotenant_mem", "processes"),
    ),
    "latency": (
        ("p95", "p95_ms"),
        ("rps", "req_per_s"),
        ("queue_ms", "queue_ms"),
        ("service_ms", "compute_ms"),
        ("service_ms", "avg_ms"),
    ),
    "gpu": (
        ("temp", "temperature_c"),
        ("power_pct", "power_w"),
        ("power_pct", "power_limit_w"),
        ("power_capped", "power_capped"),
    ),
    "queue": (
        ("length", "length"),
        ("waiting", "lag"),
        ("waiting", "pending"),
        ("oldest", "oldest_age_s"),
    ),
}
NAN = math.nan
_SERIES_PREFIX = {"slot": "slot", "latency": "backend", "queue": "queue", "gpu": "gpu"}


def stale_series(staleness: Staleness) -> list[str]:
    """The history series whose value is stale now (their sample is a gap)."""
    keys: list[str] = []
    for entity, fields in staleness.fields.items():
        kind, _, ident = entity.partition(":")
        for series, field_name in _SERIES_FIELDS.get(kind, ()):
            if field_name in fields:
                keys.append(f"{_SERIES_PREFIX[kind]}:{ident}:{series}")
    return keys


class _Keys:
    """Each entity's series keys, built once: the same string objects every tick, so the
    rings' dict lookups hit on identity and never hash a fresh string. Entries of entities
    long gone are dropped when the cache grows to twice what the fleet names."""

    def __init__(self, *suffixes: str) -> None:
        self.suffixes = suffixes
        self.keys: dict[str, tuple[str, ...]] = {}

    def of(self, prefix: str, ident: str) -> tuple[str, ...]:
        found = self.keys.get(ident)
        if found is None:
            found = self.keys[ident] = tuple(f"{prefix}:{ident}:{s}" for s in self.suffixes)
        return found

    def trim(self, live: Mapping[str, object]) -> None:
        if len(self.keys) > 2 * len(live) + 256:
            self.keys = {k: v for k, v in self.keys.items() if k in live}


_SLOT_KEYS = _Keys("activity", "mem_used", "cotenant_mem")
_BACKEND_KEYS = _Keys("p95", "rps", "queue_ms", "service_ms")
_GPU_KEYS = _Keys("temp", "power_pct", "power_capped")
_QUEUE_KEYS = _Keys("length", "waiting", "oldest")


def history_samples(
    fleet: MergedFleet,
    staleness: Staleness = FRESH,
    gaps: list[str] | None = None,
    *,
    partial: bool = False,
) -> dict[str, Sample]:
    """The values the history rings keep, one per series key (see model.history); a stale
    value is a gap (``None``), so plots and windows stop where fresh data stops (``gaps``:
    ``stale_series(staleness)``, when the caller has it already). ``partial``: ``fleet``
    holds only the entities that changed (the recorder's samples of a tick): the series
    keys of the others are kept, not trimmed away and built again next tick."""
    samples: dict[str, Sample] = {}
    serving: dict[str, int] = {}
    for b in fleet.backends.values():
        if b.slot_id is not None:
            serving[b.slot_id] = serving.get(b.slot_id, 0) + 1
    slot_keys = _SLOT_KEYS.of
    for sid, slot in fleet.slots.items():
        activity, mem_used, cotenant = slot_keys("slot", sid)
        samples[activity] = slot.activity_pct
        samples[mem_used] = slot.mem_used_mib
        # decided by counting on almost every slot: more processes than backends is rare
        if len(slot.processes) > serving.get(sid, 1):
            foreign = foreign_processes(slot.processes, serving.get(sid, 0))
            if foreign:
                samples[cotenant] = foreign_memory_mib(foreign)
    backend_keys = _BACKEND_KEYS.of
    for name, lat in fleet.latency.items():
        p95, rps, queue_ms, service_ms = backend_keys("backend", name)
        samples[p95] = lat.p95_ms
        samples[rps] = lat.req_per_s
        samples[queue_ms] = lat.queue_ms
        # time a request computes: rebalance splits a shared slot's activity by it
        samples[service_ms] = lat.compute_ms if lat.compute_ms is not None else lat.avg_ms
    gpu_keys = _GPU_KEYS.of
    for uuid, gpu in fleet.gpus.items():
        temp, power_pct, power_capped = gpu_keys("gpu", uuid)
        samples[temp] = gpu.temperature_c
        samples[power_pct] = gpu.power_pct
        capped = gpu.power_capped
        samples[power_capped] = None if capped is None else float(capped)
    queue_keys = _QUEUE_KEYS.of
    for stream, q in fleet.queues.items():
        length, waiting_key, oldest = queue_keys("queue", stream)
        samples[length] = None if q.length is None else float(q.length)
        waiting = q.waiting
        samples[waiting_key] = None if waiting is None else float(waiting)
        samples[oldest] = q.oldest_age_s
    for cache, live in (
        (_SLOT_KEYS, fleet.slots),
        (_BACKEND_KEYS, fleet.latency),
        (_GPU_KEYS, fleet.gpus),
        (_QUEUE_KEYS, fleet.queues),
    ):
        if not partial:
            cache.trim(live)
    if staleness:
        for key in stale_series(staleness) if gaps is None else gaps:
            samples[key] = None
    return samples


# the largest magnitude single precision holds: a value beyond it is kept as an infinity
_F32_MAX = 3.4028234663852886e38


def floats(values: Sequence[float | None]) -> array[float]:
    """``values`` in single precision, NaN where unknown (``model.history_blocks``): built in
    C, unless some value is unknown or too large for single precision. Packed by ``struct``
    (one C loop, a fifth of ``array("f", values)``'s time, the same bytes: a C cast to single
    precision each, a value beyond its range an infinity)."""
    out = array("f")
    try:
        out.frombytes(struct.pack(f"{len(values)}f", *values))
        return out
    except (struct.error, TypeError, OverflowError):  # a None (or a huge int): handled below
        return array(
            "f",
            [
                NAN if v is None else v if abs(v) <= _F32_MAX else math.copysign(math.inf, v)
                for v in values
            ],
        )


def history_blocks(
    fleet: MergedFleet, staleness: Staleness = FRESH, gaps: list[str] | None = None
) -> tuple[list[Block], dict[str, Sample]]:
    """What ``history_samples`` says, with each family of series as one block (kind, series,
    ids, values) for ``History.append_blocks``: a list walk per family, not a dict entry per
    series. The co-tenant memory (sampled on few slots) stays single series. The blocks are
    single precision (``array('f')``): the samples rounded to about seven digits."""
    slot_ids = tuple(fleet.slots)
    slots = list(fleet.slots.values())
    names = tuple(fleet.latency)
    latency = list(fleet.latency.values())
    uuids = tuple(fleet.gpus)
    gpus = list(fleet.gpus.values())
    streams = tuple(fleet.queues)
    queues = list(fleet.queues.values())
    # one comprehension per series reading the field straight off each entity: at 2,048 GPUs
    # these twelve walks over ~43,000 entities are most of what a tick's history costs
    blocks: list[Block] = [
        ("slot", "activity", slot_ids, floats([s.activity_pct for s in slots])),
        ("slot", "mem_used", slot_ids, floats([s.mem_used_mib for s in slots])),
        ("backend", "p95", names, floats([lat.p95_ms for lat in latency])),
        ("backend", "rps", names, floats([lat.req_per_s for lat in latency])),
        ("backend", "queue_ms", names, floats([lat.queue_ms for lat in latency])),
        (
            "backend",
            "service_ms",
            names,
            floats(
                [lat.compute_ms if lat.compute_ms is not None else lat.avg_ms for lat in latency]
            ),
        ),
        ("gpu", "temp", uuids, floats([g.temperature_c for g in gpus])),
        ("gpu", "power_pct", uuids, floats([g.power_pct for g in gpus])),
        ("gpu", "power_capped", uuids, floats([g.power_capped for g in gpus])),
        ("queue", "length", streams, floats([q.length for q in queues])),
        ("queue", "waiting", streams, floats([q.waiting for q in queues])),
        ("queue", "oldest", streams, floats([q.oldest_age_s for q in queues])),
    ]
    samples = cotenant_samples(fleet)
    if staleness:
        blank_gaps(blocks, samples, stale_series(staleness) if gaps is None else gaps)
    return blocks, samples


def cotenant_samples(fleet: MergedFleet) -> dict[str, Sample]:
    """``slot:ID:cotenant_mem`` of the slots whose processes include some no backend accounts
    for (sampled only while there are some)."""
    samples: dict[str, Sample] = {}
    slots = fleet.slots
    # a slot with one process or none has no co-tenant (a slot is let off while it has no
    # more processes than backends, counting at least one): the backends are counted only
    # when some slot has more. Comprehensions, not ``map(attrgetter)``: the interpreter's
    # specialised attribute access reads a record's field several times faster
    crowded = columns.crowded(slots)  # keyed by their ids
    if crowded:
        serving = columns.backends_per_slot(fleet.backends)
        get = serving.get
        for slot in crowded:
            sid = slot.id
            if len(slot.processes) > get(sid, 1):
                foreign = foreign_processes(slot.processes, get(sid, 0))
                if foreign:
                    samples[_SLOT_KEYS.of("slot", sid)[2]] = foreign_memory_mib(foreign)
    _SLOT_KEYS.trim(slots)
    return samples


def blank_gaps(blocks: list[Block], samples: dict[str, Sample], gaps: list[str]) -> None:
    """Stale series read as gaps: their number in their family's block becomes NaN."""
    where = {(kind, series): (ids, values) for kind, series, ids, values in blocks}
    positions: dict[tuple[str, str], dict[str, int]] = {}
    for key in gaps:
        parts = split_key(key)
        block = None if parts is None else where.get((parts[0], parts[2]))
        if parts is None or block is None:
            samples[key] = None
            continue
        ids, values = block
        index = positions.get((parts[0], parts[2]))
        if index is None:
            index = positions[(parts[0], parts[2])] = {k: i for i, k in enumerate(ids)}
        i = index.get(parts[1])
        if i is not None:
            values[i] = NAN
