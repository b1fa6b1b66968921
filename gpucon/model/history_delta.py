"""The hub's history blocks tick after tick, rebuilt only where an entity changed.

``model.history_samples.history_blocks`` reads every field of every entity each tick: twelve
walks over ~43,000 entities at 2,048 GPUs. Sources hand on the entities whose values did not
move as the same objects (the simulator does; the merge keeps them), so ``HistoryBlocks``
keeps last tick's numbers of each family and, while a kind's entities are the same ones in the
same order, copies them (in C) and reads only the entities that are new objects: one walk
comparing identities instead of a walk per field. Stale values are blanked on a copy, so a
value that turns fresh again is read as it is. The blocks are exactly ``history_blocks``'s.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Mapping
from itertools import compress
from operator import is_, is_not
from typing import Any

from gpucon.model.history import Block, Sample
from gpucon.model.history_samples import blank_gaps, cotenant_samples, floats, stale_series
from gpucon.model.merge import MergedFleet
from gpucon.model.section_moves import SectionMoves
from gpucon.model.staleness import FRESH, Staleness

NAN = math.nan


def _slot(s: Any) -> tuple[object, ...]:
    return (s.activity_pct, s.mem_used_mib)


def _slots(es: list[Any]) -> tuple[list[Any], ...]:
    return ([s.activity_pct for s in es], [s.mem_used_mib for s in es])


def _latency(lat: Any) -> tuple[object, ...]:
    service = lat.compute_ms if lat.compute_ms is not None else lat.avg_ms
    return (lat.p95_ms, lat.req_per_s, lat.queue_ms, service)


def _latencies(es: list[Any]) -> tuple[list[Any], ...]:
    return (
        [lat.p95_ms for lat in es],
        [lat.req_per_s for lat in es],
        [lat.queue_ms for lat in es],
        [c if (c := lat.compute_ms) is not None else lat.avg_ms for lat in es],
    )


def _gpu(g: Any) -> tuple[object, ...]:
    return (g.temperature_c, g.power_pct, g.power_capped)


def _gpus(es: list[Any]) -> tuple[list[Any], ...]:
    return ([g.temperature_c for g in es], [g.power_pct for g in es], [g.power_capped for g in es])


def _queue(q: Any) -> tuple[object, ...]:
    return (q.length, q.waiting, q.oldest_age_s)


def _queues(es: list[Any]) -> tuple[list[Any], ...]:
    return ([q.length for q in es], [q.waiting for q in es], [q.oldest_age_s for q in es])


One = Callable[[Any], tuple[object, ...]]
All = Callable[[list[Any]], tuple[list[Any], ...]]
# (fleet field, history kind, the families' series, one entity's samples in that order, and
# every entity's, a comprehension a series)
_KINDS: tuple[tuple[str, str, tuple[str, ...], One, All], ...] = (
    ("slots", "slot", ("activity", "mem_used"), _slot, _slots),
    ("latency", "backend", ("p95", "rps", "queue_ms", "service_ms"), _latency, _latencies),
    ("gpus", "gpu", ("temp", "power_pct", "power_capped"), _gpu, _gpus),
    ("queues", "queue", ("length", "waiting", "oldest"), _queue, _queues),
)


class _Kept:
    """One kind's last tick: its mapping, its ids, its entities in that order, each family's
    numbers."""

    __slots__ = ("entities", "ids", "mapping", "numbers")

    def __init__(
        self,
        mapping: Mapping[str, object],
        ids: tuple[str, ...],
        entities: list[object],
        numbers: list[Any],
    ) -> None:
        self.mapping = mapping
        self.ids = ids
        self.entities = entities
        self.numbers = numbers


class HistoryBlocks:
    """``history_blocks`` with last tick's numbers kept (the hub's, one instance a hub)."""

    def __init__(self, moves: SectionMoves | None = None) -> None:
        self._kept: dict[str, _Kept] = {}
        # told which entities are new objects, for the recorder's same comparison
        self._moves = moves

    def note_moves_in(self, moves: SectionMoves) -> None:
        """From now on, note in ``moves`` which entities each tick found new."""
        self._moves = moves

    def __call__(
        self,
        fleet: MergedFleet,
        staleness: Staleness = FRESH,
        gaps: list[str] | None = None,
        give_way: Callable[[], object] | None = None,
    ) -> tuple[list[Block], dict[str, Sample]]:
        """``give_way`` (the hub's) is called between the kinds: at 2,048 GPUs working them
        all out is ~30 ms of CPU on a loaded machine, the longest stretch of a tick."""
        blocks: list[Block] = []
        for index, (field, kind, series, one, every) in enumerate(_KINDS):
            if give_way is not None and index:
                give_way()
            by_id: Mapping[str, object] = getattr(fleet, field)
            numbers = self._numbers(field, by_id, one, every)
            ids = self._kept[field].ids
            for name, values in zip(series, numbers, strict=True):
                # the kept numbers are never written again: a stale value is blanked on a copy
                blocks.append((kind, name, ids, values[:] if staleness else values))
        samples = cotenant_samples(fleet)
        if staleness:
            blank_gaps(blocks, samples, stale_series(staleness) if gaps is None else gaps)
        return blocks, samples

    def _numbers(
        self,
        field: str,
        by_id: Mapping[str, object],
        one: One,
        every: All,
    ) -> list[array[float]]:
        ids = tuple(by_id)
        entities = list(by_id.values())
        kept = self._kept.get(field)
        moved: list[int] | None = None
        if kept is not None and kept.ids == ids:
            old = kept.entities
            if self._moves is not None:
                # the new objects' positions, for the recorder too (whatever their number)
                moved = list(compress(range(len(entities)), map(is_not, entities, old)))
                self._moves.note(by_id, kept.mapping, moved, entities)
                if 4 * len(moved) > len(entities):
                    moved = None
            # counted in C first: with every entity a new object (a live source) the list
            # of those that moved is never made
            elif 4 * (len(entities) - sum(map(is_, entities, old))) <= len(entities):
                moved = list(compress(range(len(entities)), map(is_not, entities, old)))
        if kept is None or moved is None:
            # entities came, went or moved, or most are new objects: read them all, a field
            # at a time (comprehensions beat a loop over the few that moved past a quarter)
            numbers = [floats(column) for column in every(entities)]
        else:
            numbers = [values[:] for values in kept.numbers]  # copied in C
            for i in moved:
                for values, v in zip(numbers, one(entities[i]), strict=True):
                    values[i] = NAN if v is None else v  # type: ignore[call-overload]
        self._kept[field] = _Kept(by_id, ids, entities, numbers)
        return numbers
