"""A request stream made anew under a running fleet: ``queue_lost`` (WARN, for 15 minutes).

A Redis without persistence that restarts, or a ``FLUSHALL``, drops every request waiting in
the stream; the scheduler makes its consumer group again, the queue reads short and healthy,
and nothing says requests were dropped (in ``gpucon lab`` the screen was all clear a tick
later). Redis 7 counts the entries a consumer group has read (XINFO GROUPS ``entries-read``):
the count only grows while the group lives, so one that goes back says the stream or its group
was made anew. The hub keeps each stream's last count and how many requests waited then
(``QueueCount``), and each loss (``QueueLost``) for ``LOST_KEEP_S``; ``queue_lost`` names it,
dated from the first read that saw the count go back. A read that failed, or found no group,
changes nothing: the count before the flush stands until the group reads again.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpucon.model.alert_base import AlertInputs, AlertThresholds, Found, Severity


def lost_at(i: AlertInputs, stream: str) -> float | None:
    return next((x.at for x in i.queue_lost if x.stream == stream), None)


def queue_lost(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    for x in i.queue_lost:
        if x.waiting_before is None:
            waiting = "how many requests were waiting then is unknown"
        elif x.waiting_before == 0:
            waiting = "no request was waiting at the read before"
        else:
            waiting = f"{x.waiting_before} requests were waiting then and may be lost"
        yield (
            "queue_lost",
            x.stream,
            Severity.WARNING,
            f"the stream or its consumer group was made anew: the group's read count went "
            f"back from {x.read_before} to {x.read_after}; {waiting} (Redis FLUSHALL, "
            "restarted without persistence, or the group recreated)",
        )


RULES = (queue_lost,)
