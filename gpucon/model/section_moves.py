"""Which entities of a snapshot's section are new objects since the section before it, as the
hub's history found them, for whoever compares the same two mappings again (the recorder).

The hub's history (``history_delta.HistoryBlocks``) compares each tick's slots, latency, GPUs
and queues with last tick's, entity by entity, by identity, to read only the new objects. The
recorder makes the same comparison of the same two mappings a moment later, on its own
thread. Each hub owns a ``SectionMoves`` (``Hub.moves``), noted into once something
subscribes, and hands it to its recorder: it keeps the newest findings, each tied to the two
mapping objects it compared (held, so their ids cannot be reused): a finding is given only for
exactly those two objects, so a reader that framed another mapping in between compares for
itself. Bounded: a reader more than a few ticks behind finds nothing and compares for itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

# findings kept (four sections a tick: the last 2 ticks; the recorder is less than a tick
# behind, and one further behind compares for itself). Each holds two whole mappings (at 2,048
# GPUs ~0.6 MiB apiece) and keeps the older one's changed entities alive
LIMIT = 8


class SectionMoves:
    """Findings by the mapping they describe: (the mapping before, positions, values)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._found: OrderedDict[int, tuple[Mapping[str, Any], Mapping[str, Any], Any]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def note(
        self,
        now: Mapping[str, Any],
        before: Mapping[str, Any],
        moved: list[int],
        values: list[Any],
    ) -> None:
        """``now`` has the keys of ``before`` in the same order, its values are ``values``
        (never changed by anyone: shared), and those at ``moved`` are not ``before``'s
        objects (every other one is)."""
        with self._lock:
            self._found[id(now)] = (now, before, (moved, values))
            while len(self._found) > self._limit:
                self._found.popitem(last=False)

    def between(
        self, now: Mapping[str, Any], before: Mapping[str, Any]
    ) -> tuple[list[int], list[Any]] | None:
        """(the positions of ``now``'s new objects, ``now``'s values) when noted for exactly
        these two mappings, once (the finding is let go of); None otherwise."""
        with self._lock:
            hit = self._found.get(id(now))
            if hit is not None and hit[0] is now and hit[1] is before:
                # taken: its two mappings (the older one's changed entities) are let go of
                # now rather than two ticks later (a reader asks once per mapping)
                del self._found[id(now)]
        if hit is None or hit[0] is not now or hit[1] is not before:
            return None
        found: tuple[list[int], list[Any]] = hit[2]
        return found
