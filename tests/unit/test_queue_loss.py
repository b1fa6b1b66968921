"""``queue_lost``: a stream whose consumer group's read count went back (the stream or the
group made anew: a FLUSHALL, Redis restarted without persistence) is named for 15 minutes,
with the requests that were waiting before; a failed read or a missing group changes nothing."""

from __future__ import annotations

from gpucon.model.alert_base import Severity
from gpucon.model.alerts import AlertThresholds, derive_alerts
from gpucon.model.fleet import QueueStats
from gpucon.model.history import History
from gpucon.model.queue_counts import LOST_KEEP_S, QueueCount, QueueLost, track_queue_counts
from tests.unit.test_model_early_warning import inputs

S = "gen:queue"


def q(read: int | None, lag: int = 0, pending: int = 0) -> dict[str, QueueStats]:
    return {S: QueueStats(S, group="g", lag=lag, pending=pending, entries_read=read)}


def test_a_count_that_goes_back_is_a_loss_and_nothing_else_is() -> None:
    counts, lost = track_queue_counts({}, (), q(10, lag=4), True, 100.0)
    assert counts == {S: QueueCount(10, 4)} and lost == ()
    # growing, the same, or read stale / with no group: no loss, the same objects
    grown, lost = track_queue_counts(counts, lost, q(15, lag=5), True, 101.0)
    assert lost == ()
    assert track_queue_counts(grown, lost, q(15, lag=5), True, 102.0)[0] is grown
    assert track_queue_counts(grown, lost, q(0), False, 103.0)[0] is grown
    assert track_queue_counts(grown, lost, q(None), True, 103.0)[0] is grown
    # flushed: the group made again, its count back to 0
    after, lost = track_queue_counts(grown, lost, q(0, lag=1), True, 104.0)
    assert lost == (QueueLost(S, 104.0, 15, 0, 5),)
    assert after == {S: QueueCount(0, 1)}
    # named for LOST_KEEP_S, then let go of
    assert track_queue_counts(after, lost, q(3), True, 104.0 + LOST_KEEP_S - 1)[1] == lost
    assert track_queue_counts(after, lost, q(3), True, 104.0 + LOST_KEEP_S)[1] == ()


def test_the_alert_says_what_went_back_and_is_dated_from_the_loss() -> None:
    lost = (QueueLost(S, 90.0, 15, 0, 5),)
    parts = inputs(100.0, History(capacity=8), queue_lost=lost)
    (alert,) = [a for a in derive_alerts(parts, AlertThresholds()) if a.rule == "queue_lost"]
    assert alert.target == S and alert.severity is Severity.WARNING
    assert alert.since == 90.0
    assert alert.message == (
        "the stream or its consumer group was made anew: the group's read count went back "
        "from 15 to 0; 5 requests were waiting then and may be lost (Redis FLUSHALL, "
        "restarted without persistence, or the group recreated)"
    )
    # nothing waited: nothing said lost
    quiet = inputs(100.0, History(capacity=8), queue_lost=(QueueLost(S, 90.0, 561, 7, 0),))
    (alert,) = [a for a in derive_alerts(quiet, AlertThresholds()) if a.rule == "queue_lost"]
    assert "back from 561 to 7; no request was waiting at the read before (" in alert.message
