"""Which values are stale, where they came from and how old they are.

A source's data is stale when its last good reading is older than ``STALE_CADENCES`` of the
source's cadence, or when its newest read failed (a failed read says the data is no longer
current, whatever its age). Every value the merge took from a stale source is stale, with the
age of that source's last good reading; a value a fresh source gave is fresh, even on an entity
another (stale) source also told of.

Which source gave a field follows the merge's rule (sources in priority order; the first one
that knows a field wins), worked out only when some source is stale: the common tick pays
nothing. Entity keys: ``gpu:UUID``, ``slot:ID``, ``backend:NAME``, ``latency:NAME`` (the
backend the latency was resolved to), ``queue:STREAM``, ``node:NAME``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from gpucon.model.fleet import Backend, NodeInfo
from gpucon.model.merge import MergedFleet, latency_name_resolver, slot_join_key
from gpucon.model.reading import Reading

# a value older than this many of its source's cadences is stale
STALE_CADENCES = 2.0


def stale_after_s(cadence_s: float) -> float:
    """How old a source's last good reading may get before its values are stale."""
    return STALE_CADENCES * cadence_s


class Staleness(msgspec.Struct, frozen=True):
    """The stale values of one snapshot: by entity and field, the stale source each came from,
    and each stale source's age (seconds since its last good reading was taken)."""

    # stale source name -> age (s) of its last good reading
    sources: Mapping[str, float] = msgspec.field(default_factory=dict)
    # entity key -> field name -> the stale source that gave it (stale values only)
    fields: Mapping[str, Mapping[str, str]] = msgspec.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.fields)

    def age(self, entity_key: str, field_name: str) -> float | None:
        """The age of a stale value, or None when the value is fresh (or unknown)."""
        by_field = self.fields.get(entity_key)
        source = None if by_field is None else by_field.get(field_name)
        return None if source is None else self.sources.get(source)

    def ages(self, entity_key: str) -> dict[str, float]:
        """Field -> age of every stale value of one entity (empty when all are fresh)."""
        by_field = self.fields.get(entity_key)
        if not by_field:
            return {}
        return {f: self.sources[s] for f, s in by_field.items() if s in self.sources}

    def oldest(self, entity_key: str) -> float | None:
        """The age of the oldest stale value of one entity, or None when all are fresh."""
        ages = self.ages(entity_key)
        return max(ages.values()) if ages else None


FRESH = Staleness()

# the fields an entity is joined by: they name it, they do not go stale
_IDENTITY = frozenset(("uuid", "id", "kind", "key", "stream"))
_GETTERS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def _known_fields(item: object) -> list[str]:
    """The names of the fields ``item`` knows (not None, not empty), identity fields aside."""
    cls = type(item)
    entry = _GETTERS.get(cls)
    if entry is None:
        identity = _IDENTITY | ({"name"} if cls in (Backend, NodeInfo) else set())
        names = tuple(n for n in cls.__struct_fields__ if n not in identity)  # type: ignore[attr-defined]
        getter = operator.attrgetter(*names) if len(names) > 1 else _one(names[0])
        entry = _GETTERS[cls] = (names, getter)
    names, getter = entry
    return [n for n, v in zip(names, getter(item), strict=True) if v is not None and v != ()]


def _one(name: str) -> Callable[[Any], tuple[Any, ...]]:
    get = operator.attrgetter(name)
    return lambda item: (get(item),)


def _fragments(
    reading: Reading, fleet: MergedFleet, slot_id: Callable[[Any], str], latency_name: Any
) -> Iterable[tuple[str, object]]:
    """(entity key, fragment) of everything one reading told of, keyed as the merge joined it."""
    for g in reading.gpus:
        yield f"gpu:{g.uuid}", g
    for s in reading.slots:
        yield f"slot:{slot_id(s)}", s
    for b in reading.backends:
        yield f"backend:{b.name}", b
    for lat in reading.latency:
        yield f"latency:{latency_name(lat)}", lat
    for q in reading.queues:
        yield f"queue:{q.stream}", q
    for n in reading.nodes:
        yield f"node:{n.name}", n


Signature = tuple[tuple[object, ...], ...]


def _signature(reading: Reading) -> Signature:
    """What a reading claims: each fragment's identity and the names of the fields it knows.

    The attribution of stale fields depends on the readings only through this (not on their
    values), and it stays the same from one read of a source to the next while the fleet's
    shape does."""
    sig: list[tuple[object, ...]] = []
    for g in reading.gpus:
        sig.append(("g", g.uuid, *_known_fields(g)))
    for s in reading.slots:
        sig.append(("s", slot_join_key(s), s.id, *_known_fields(s)))
    for b in reading.backends:
        sig.append(("b", b.name, *_known_fields(b)))
    for lat in reading.latency:
        sig.append(("l", lat.key, *_known_fields(lat)))
    for q in reading.queues:
        sig.append(("q", q.stream, *_known_fields(q)))
    for n in reading.nodes:
        sig.append(("n", n.name, *_known_fields(n)))
    return tuple(sig)


class StaleFieldCache:
    """``stale_fields`` that reuses its last answer while nothing it depends on changed: which
    sources are stale, what each reading up to the last stale one claims (its signature, worked
    out once per reading), and the backends' urls. A dead source's reading does not change, and
    a fresh source's next reading usually claims the same fields of the same entities, so an
    outage costs the attribution once, not every tick."""

    def __init__(self) -> None:
        self._signatures: dict[str, tuple[Reading, Signature]] = {}
        self._key: tuple[object, ...] | None = None
        self._fields: Mapping[str, Mapping[str, str]] = {}

    def _signature(self, reading: Reading) -> Signature:
        cached = self._signatures.get(reading.source)
        if cached is not None and cached[0] is reading:
            return cached[1]
        sig = _signature(reading)
        self._signatures[reading.source] = (reading, sig)
        return sig

    def __call__(
        self, readings: Sequence[Reading], fleet: MergedFleet, stale_sources: Mapping[str, float]
    ) -> Staleness:
        if not stale_sources:
            self._key = None
            self._signatures.clear()
            return FRESH
        last = max((i for i, r in enumerate(readings) if r.source in stale_sources), default=-1)
        # latency keyed by host:port joins the backend with that url, which a later (fresh)
        # source may change: the urls are part of what the answer depends on
        urls = {name: b.url for name, b in fleet.backends.items()}
        sigs = tuple((r.source, self._signature(r)) for r in readings[: last + 1])
        key = (frozenset(stale_sources), urls, sigs)
        if key != self._key:  # tuples compare item by item, identical signatures at once
            self._fields = stale_fields(readings, fleet, stale_sources).fields
            self._key = key
        return Staleness(dict(stale_sources), self._fields)


def stale_fields(
    readings: Sequence[Reading], fleet: MergedFleet, stale_sources: Mapping[str, float]
) -> Staleness:
    """The Staleness of a fleet merged from ``readings`` (priority order), given which sources
    are stale and how old their data is. Cost: nothing when no source is stale; otherwise one
    pass over the fragments of the readings up to the last stale one."""
    if not stale_sources:
        return FRESH
    last = max((i for i, r in enumerate(readings) if r.source in stale_sources), default=-1)
    if last < 0:
        return Staleness(dict(stale_sources), {})
    join_to_id = {slot_join_key(s): s.id for s in fleet.slots.values()}

    def slot_id(s: Any) -> str:
        return join_to_id.get(slot_join_key(s), s.id)  # type: ignore[no-any-return]

    latency_name = latency_name_resolver(
        fleet.backends, [lat for r in readings for lat in r.latency]
    )
    claimed: dict[str, set[str]] = {}
    fields: dict[str, dict[str, str]] = {}
    for reading in readings[: last + 1]:
        stale = reading.source in stale_sources
        for key, fragment in _fragments(reading, fleet, slot_id, latency_name):
            taken = claimed.setdefault(key, set())
            for name in _known_fields(fragment):
                if name in taken:
                    continue  # an earlier (higher-priority) source gave this field
                taken.add(name)
                if stale:
                    fields.setdefault(key, {})[name] = reading.source
    return Staleness(dict(stale_sources), fields)
