"""How long a queue's oldest request has waited, as far as this console can tell now.

A fresh read gives the oldest waiting entry's age. A stale one (Redis stopped, killed, or out
of reach) gave it as of its read: an entry that waited then has, if it is still waiting, waited
that long plus the time since, so the stale value is a lower bound that grows (``≥45 s``),
not the ``0.0 s`` it read. A read that found nothing waiting bounds nothing: it stays as read,
dimmed with its age. Entries answered since the read (the console alone cut off from a Redis
that still serves) are the bound's one blind spot; nothing the console holds can tell.
"""

from __future__ import annotations

import msgspec

from gpucon.model.fleet import QueueStats
from gpucon.model.staleness import Staleness


class OldestWait(msgspec.Struct, frozen=True, gc=False):
    """The oldest request's wait (seconds); ``at_least``: a lower bound (the read is stale)."""

    seconds: float
    at_least: bool = False


def oldest_wait(q: QueueStats, staleness: Staleness) -> OldestWait | None:
    """The oldest wait of ``q`` now (None: no source reports it): as read while the read is
    fresh; its age at the read plus the read's age while stale and something waited."""
    if q.oldest_age_s is None:
        return None
    read_age_s = staleness.age(f"queue:{q.stream}", "oldest_age_s")
    if read_age_s is None or not (q.waiting or 0) > 0:
        return OldestWait(q.oldest_age_s)
    return OldestWait(q.oldest_age_s + read_age_s, at_least=True)


def fmt_at_least(seconds: float) -> str:
    """A lower bound on a wait, floored so it stays true and changes at most every 5 s past
    10 s: ``≥3 s``, ``≥45 s``, ``≥4 min``, ``≥2 h`` (never wider than the queue panel's
    OLDEST column, 7 cells)."""
    s = max(0.0, seconds)
    if s < 10:
        return f"≥{int(s)} s"
    if s < 90:
        return f"≥{int(s // 5) * 5} s"
    if s < 5400:
        return f"≥{int(s // 60)} min"
    return f"≥{int(s // 3600)} h"
