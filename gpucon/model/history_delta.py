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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpucon.model.history import Block, Sample
from gpucon.model.history_samples import blank_gaps, cotenant_samples, floats, stale_series
from gpucon.model.merge import MergedFleet
from gpucon.model.staleness import FRESH, Staleness

NAN = math.nan


def _slot(s: Any) -> tuple[object, ...]:
    return (s.activity_pct, s.mem_used_mib)


def _latency(lat: Any) -> tuple[object, ...]:
    return (
        lat.p95_ms,
        lat.req_per_s,
        lat.queue_ms,
        lat.compute_ms if lat.compute_ms is not None else lat.avg_ms,
    )


def _gpu(g: Any) -> tuple[object, ...]:
    return (g.temperature_c, g.power_pct, g.power_capped)


def _queue(q: Any) -> tuple[object, ...]:
    return (q.length, q.waiting, q.oldest_age_s)


# (fleet field, history kind, the families' series, one entity's samples, in that order)
_KINDS: tuple[tuple[str, str, tuple[str, ...], Callable[[Any], tuple[object, ...]]], ...] = (
    ("slots", "slot", ("activity", "mem_used"), _slot),
    ("latency", "backend", ("p95", "rps", "queue_ms", "service_ms"), _latency),
    ("gpus", "gpu", ("temp", "power_pct", "power_capped"), _gpu),
    ("queues", "queue", ("length", "waiting", "oldest"), _queue),
)


class _Kept:
    """One kind's last tick: its ids, its entities in that order, each family's numbers."""

    __slots__ = ("entities", "ids", "numbers")

    def __init__(self, ids: tuple[str, ...], entities: list[object], numbers: list[Any]) -> None:
        self.ids = ids
        self.entities = entities
        self.numbers = numbers


class HistoryBlocks:
    """``history_blocks`` with last tick's numbers kept (the hub's, one instance a hub)."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}

    def __call__(
        self, fleet: MergedFleet, staleness: Staleness = FRESH, gaps: list[str] | None = None
    ) -> tuple[list[Block], dict[str, Sample]]:
        blocks: list[Block] = []
        for field, kind, series, samples_of in _KINDS:
            by_id: Mapping[str, object] = getattr(fleet, field)
            numbers = self._numbers(field, by_id, samples_of, len(series))
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
        samples_of: Callable[[Any], tuple[object, ...]],
        width: int,
    ) -> list[array[float]]:
        ids = tuple(by_id)
        entities = list(by_id.values())
        kept = self._kept.get(field)
        if kept is None or kept.ids != ids:  # entities came, went or moved: read them all
            rows = [samples_of(e) for e in entities]
            columns: Sequence[Sequence[Any]] = list(zip(*rows, strict=True)) or [()] * width
            numbers = [floats(c) for c in columns]
        else:
            old = kept.entities
            moved = [i for i, (a, b) in enumerate(zip(entities, old, strict=True)) if a is not b]
            numbers = [values[:] for values in kept.numbers]  # copied in C
            for i in moved:
                for values, v in zip(numbers, samples_of(entities[i]), strict=True):
                    values[i] = NAN if v is None else v  # type: ignore[call-overload]
        self._kept[field] = _Kept(ids, entities, numbers)
        return numbers
