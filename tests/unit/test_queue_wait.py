"""``model.queue_wait``: a stale oldest wait is a floored lower bound; a fresh one is as read."""

from __future__ import annotations

from gpucon.model.fleet import QueueStats
from gpucon.model.queue_wait import OldestWait, fmt_at_least, oldest_wait
from gpucon.model.staleness import Staleness

STALE = Staleness({"redis": 45.0}, {"queue:q": {"oldest_age_s": "redis", "lag": "redis"}})


def test_fresh_read_is_as_read() -> None:
    q = QueueStats(stream="q", lag=1, pending=0, oldest_age_s=2.5)
    assert oldest_wait(q, Staleness()) == OldestWait(2.5)


def test_stale_read_with_something_waiting_grows_by_the_reads_age() -> None:
    q = QueueStats(stream="q", lag=0, pending=1, oldest_age_s=0.04)
    assert oldest_wait(q, STALE) == OldestWait(45.04, at_least=True)


def test_stale_read_of_an_empty_queue_bounds_nothing() -> None:
    q = QueueStats(stream="q", lag=0, pending=0, oldest_age_s=0.0)
    assert oldest_wait(q, STALE) == OldestWait(0.0)
    assert oldest_wait(QueueStats(stream="q"), STALE) is None


def test_lower_bounds_are_floored_and_fit_seven_cells() -> None:
    cases = {3.9: "≥3 s", 49.9: "≥45 s", 89.9: "≥85 s", 251.0: "≥4 min", 5399.0: "≥89 min"}
    for seconds, text in cases.items():
        assert fmt_at_least(seconds) == text
    assert fmt_at_least(7300.0) == "≥2 h"
    assert max(len(fmt_at_least(s)) for s in range(0, 400_000, 7)) <= 7
