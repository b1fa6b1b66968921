"""Each request stream's consumer-group read count as last seen, and the streams made anew
(the state behind ``model/queue_loss``'s rule, kept by the hub and recorded with each snapshot).
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from gpucon.model.fleet import QueueStats

# how long a stream made anew is named
LOST_KEEP_S = 900.0


class QueueCount(msgspec.Struct, frozen=True, gc=False):
    """A stream's consumer group as last read: its read count, and the requests waiting."""

    read: int
    waiting: int | None


class QueueLost(msgspec.Struct, frozen=True, gc=False):
    """A stream whose group's read count went back: when, from what to what, and how many
    requests were waiting at the read before."""

    stream: str
    at: float
    read_before: int
    read_after: int
    waiting_before: int | None


def track_queue_counts(
    counts: Mapping[str, QueueCount],
    lost: tuple[QueueLost, ...],
    queues: Mapping[str, QueueStats],
    read_fresh: bool,
    now: float,
) -> tuple[Mapping[str, QueueCount], tuple[QueueLost, ...]]:
    """Each stream's count as of this tick, and the losses still named (``counts`` and
    ``lost`` themselves while nothing changed: the same objects, tick after tick)."""
    kept = tuple(x for x in lost if now - x.at < LOST_KEEP_S)
    if len(kept) == len(lost):
        kept = lost
    if not read_fresh:
        return counts, kept
    changed: dict[str, QueueCount] = {}
    found: list[QueueLost] = []
    for stream, q in queues.items():
        if q.entries_read is None:
            continue  # no group now (flushed, not made again yet): the last count stands
        before = counts.get(stream)
        if before is not None and before.read == q.entries_read and before.waiting == q.waiting:
            continue
        if before is not None and q.entries_read < before.read:
            found.append(QueueLost(stream, now, before.read, q.entries_read, before.waiting))
        changed[stream] = QueueCount(q.entries_read, q.waiting)
    if found:
        again = {f.stream for f in found}  # a stream lost twice is named for the newer loss
        kept = tuple(x for x in kept if x.stream not in again) + tuple(found)
    return ({**counts, **changed} if changed else counts), kept
