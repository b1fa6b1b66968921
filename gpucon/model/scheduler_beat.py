"""The scheduler's heartbeat as the console sees it, and the in-flight counts it vouches for.

In-flight counts come from the registry (``gpucon:inflight``) in Redis, but Redis only keeps
them; the scheduler counts. A dead scheduler leaves them frozen while Redis answers fine, so
their source being fresh says nothing about them. A scheduler that writes a heartbeat
(``gpucon.registry.heartbeat``) tells the console how old its counts are: when the newest
heartbeat is older than two of its period (plus the console's read lag), every backend's
in-flight count is stale, with the heartbeat's age, under the pseudo-source ``scheduler``.
So is the req/s of each backend it counts, while the silence is shorter than the rate's window:
nothing has been sent on since, yet a 1-minute rate still averages the minute before (it read
9.2 then 4.6 req/s 10 and 35 s after a ``kill -9``, while the backends got nothing); past the
window the rate covers only the silence and is current again. A scheduler that writes none is
unknown, not dead: nothing is marked.

A heartbeat's age is Redis's clock against the scheduler's, so a scheduler whose clock is 30 s
behind looked 30 s silent while it beat every second (``the scheduler's heartbeat stopped 30s
ago ... is the scheduler running?``, its counts and rates dimmed), and one whose clock is ahead
would look alive for as long after it died. Once this console has seen the heartbeat change
(``BeatClock``), the age is measured on its own clock from the read that first saw the newest
beat, whatever the scheduler's clock says; and the beat's age as Redis saw it when it was new
says how far the scheduler's clock is behind, a beat dated after Redis's clock how far it is
ahead (``scheduler_clock``, WARN either way: the dates it writes into the registry,
``ready_at``, ``changed_at``, are off by as much).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from gpucon.model.ages import fmt_elapsed
from gpucon.model.alert_base import AlertInputs, AlertThresholds, Found, Severity
from gpucon.model.fleet import Backend, LatencyStats
from gpucon.model.reading import SchedulerBeat
from gpucon.model.staleness import STALE_CADENCES, Staleness

__all__ = [
    "RULES",
    "SCHEDULER",
    "BeatClock",
    "SchedulerBeat",
    "SchedulerStaleness",
    "beat_age",
    "scheduler_silent",
    "silent_age",
]

# the name stale in-flight counts are attributed to (``stale_fields`` and the JSON say it)
SCHEDULER = "scheduler"


def beat_age(beat: SchedulerBeat, taken_at: float, now: float) -> float:
    """The heartbeat's age now (the read's age added to its age at the read)."""
    return beat.age_s + max(0.0, now - taken_at)


def silent_after_s(beat: SchedulerBeat, read_cadence_s: float) -> float:
    """How old the heartbeat may get before the counts it vouches for are stale: two of its
    periods, and one of the console's reads (the read itself may be that old)."""
    return STALE_CADENCES * beat.every_s + read_cadence_s


class SchedulerStaleness:
    """Adds the stale in-flight counts of a silent scheduler to a tick's Staleness, reusing the
    fields it built while the same backends count and the same other values are stale (so the
    hub's history gaps are worked out once per outage, not per tick)."""

    def __init__(self) -> None:
        self._base: Mapping[str, Mapping[str, str]] | None = None  # held: compared by identity
        self._counted: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._fields: Mapping[str, Mapping[str, str]] = {}

    def __call__(
        self,
        staleness: Staleness,
        backends: Mapping[str, Backend],
        age_s: float | None,
        latency: Mapping[str, LatencyStats] | None = None,
    ) -> Staleness:
        """``staleness`` with every backend's in-flight count stale at ``age_s`` (the silent
        heartbeat's age), and its req/s while ``age_s`` is within the rate's window, except
        those already stale for another reason; unchanged when ``age_s`` is None (the
        scheduler beats, or writes no heartbeat)."""
        if age_s is None:
            return staleness
        counted = tuple(n for n, b in backends.items() if b.inflight is not None)
        lagging = tuple(n for n in counted if _rate_lags((latency or {}).get(n), age_s))
        if self._base is not staleness.fields or self._counted != (counted, lagging):
            fields = {k: dict(v) for k, v in staleness.fields.items()}
            for name in counted:
                by_field = fields.setdefault(f"backend:{name}", {})
                by_field.setdefault("inflight", SCHEDULER)
            for name in lagging:
                fields.setdefault(f"latency:{name}", {}).setdefault("req_per_s", SCHEDULER)
            self._base, self._counted, self._fields = staleness.fields, (counted, lagging), fields
        return Staleness({**staleness.sources, SCHEDULER: age_s}, self._fields)


def _rate_lags(lat: LatencyStats | None, silent_s: float) -> bool:
    """A backend's rate still averages time before the scheduler went silent (an unknown
    window: it may)."""
    if lat is None or lat.req_per_s is None:
        return False
    return lat.rate_window_s is None or silent_s < lat.rate_window_s


# a scheduler clock at least this far behind Redis's (beyond one read), or ahead of it, is named
SKEW_WARN_S = 5.0


class BeatClock:
    """Ages heartbeats on this console's clock once it has seen them change (see the module)."""

    def __init__(self) -> None:
        # scheduler -> (its newest ``at``, taken_at of the read that first saw it, whether a
        # change was seen: the first value seen may be a dead scheduler's last)
        self._seen: dict[str, tuple[float, float, bool]] = {}
        # how far behind Redis's clock the scheduler's is, at least (seconds), when measured;
        # below 0: ahead of it by at least that much
        self.behind_s: float | None = None

    def __call__(self, beat: SchedulerBeat, taken_at: float, cadence_s: float) -> SchedulerBeat:
        """``beat`` aged from the read that first saw it (``taken_at`` of that read), once a
        change of its ``at`` has been seen; as read (Redis's clock) before that."""
        if beat.at is None:
            return beat
        seen = self._seen.get(beat.scheduler)
        if seen is None or seen[0] != beat.at:
            changed = seen is not None
            self._seen[beat.scheduler] = seen = (beat.at, taken_at, changed)
            if changed:  # a new beat, at most a read old: its age beyond that is skew
                behind = beat.age_s - cadence_s
                self.behind_s = behind if behind >= SKEW_WARN_S else None
            if beat.ahead_s >= SKEW_WARN_S:  # dated after Redis's clock: ahead, whatever its age
                self.behind_s = -beat.ahead_s
        _, first_seen, changed = seen
        if not changed:
            return beat
        return msgspec.structs.replace(beat, age_s=max(0.0, taken_at - first_seen))


def silent_age(beats: Sequence[tuple[SchedulerBeat, float, float]], now: float) -> float | None:
    """The age of the newest heartbeat when it is silent, else None: ``beats`` are (beat, the
    read's taken_at, that read's cadence) from fresh reads."""
    ages = [(beat_age(b, taken, now), silent_after_s(b, cadence)) for b, taken, cadence in beats]
    if not ages:
        return None
    age, after = min(ages)
    return age if age > after else None


def scheduler_silent(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    """``scheduler_silent``: its heartbeat stopped. CRIT while requests wait (nobody sends
    them anywhere, and ``queue_stalled`` says so only after 20 s), WARN while none does."""
    age = i.scheduler_silent_s
    if age is None:
        return
    waiting = sum((q.lag or 0) + (q.pending or 0) for q in i.queues.values())
    severity = Severity.CRITICAL if waiting else Severity.WARNING
    yield (
        "scheduler_silent",
        SCHEDULER,
        severity,
        f"the scheduler's heartbeat stopped {fmt_elapsed(age)} ago: in-flight counts are not "
        f"kept and no request is sent on ({waiting} waiting); is the scheduler running?",
    )


def scheduler_clock(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    """``scheduler_clock``: the scheduler's heartbeats are already old as they are written
    (its clock is behind Redis's), or dated after Redis's time (ahead of it): its registry
    dates are off by as much (WARN)."""
    behind = i.scheduler_behind_s
    if behind is None or i.scheduler_silent_s is not None:
        return
    if behind >= 0:
        said = (
            f"the scheduler's clock is at least {fmt_elapsed(behind)} behind Redis's: it beats, "
            "but each heartbeat reads that old as it is written"
        )
    else:
        said = (
            f"the scheduler's clock is at least {fmt_elapsed(-behind)} ahead of Redis's: it "
            "beats, but each heartbeat is dated that far after Redis's time as it is written"
        )
    yield (
        "scheduler_clock",
        SCHEDULER,
        Severity.WARNING,
        f"{said}; the registry dates it writes (ready_at, changed_at) are off as much: check "
        "NTP on its host",
    )


RULES = (scheduler_silent, scheduler_clock)
