"""Early warning on a request stream: its waiting count growing, sharply or steadily.

Two ways a stream's waiting count (lag + pending) shows a problem coming:

- **sharp**: it rose in each of its last 2 or 3 (``queue_growth_ticks``) ticks, by at least
  ``queue_growth_min`` entries across them and by ``queue_growth_pct`` of what waited before
  (a traffic spike; noise does not rise tick after tick by that much, and a deep queue that
  drifts a little is not a spike). Once raised, the alert holds while the count is still
  above where it was that many ticks before, so one tick of noise in a growing queue does not
  make it blink.
- **steady**: a least-squares slope of at least ``queue_growth_per_s`` over
  ``queue_growth_window_s``, grown by ``queue_growth_pct`` of what waited at the window's start
  (a deep queue that drifts a little is not a burst).

Either way at least ``queue_growth_min_waiting`` wait. The alert's target is the stream; it says
the trend it saw: the rate, for how many ticks, what waits, how old the oldest entry is, and which
models' queue time rose with it ("queue growing +4.1/s for 3 ticks (3 s), 16 waiting,
oldest 2.6 s (was 0.0 s); queue time up: sd15 2.7 s, sdxl 1.9 s"). A tick reads a few
samples per stream (O(1) each); the window only for a stream whose count rose.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import NamedTuple

from gpucon.model.alert_base import (
    AlertInputs,
    AlertThresholds,
    Found,
    Severity,
    fmt,
    fmt_ms,
    fmt_wait,
)
from gpucon.model.history import Sample
from gpucon.model.trends import known_points, slope, ticks_within

RULE = "queue_growth"
# a backend's queue time "rose with" the stream when it at least doubled, by this much or more
QUEUE_TIME_RISE_MS = 100.0
MODELS_NAMED = 3
# how a sharp rise's message says its span ("for 4 ticks (4 s)"); a steady one says "over"
SHARP = " ticks ("


class Growth(NamedTuple):
    """A rise of a stream's waiting count, as measured."""

    rate: float  # entries per second
    span: float  # seconds it was measured over
    ticks: int  # ticks it was measured over
    sharp: bool  # rose tick after tick (else: a steady trend over the window)
    clamped: bool  # it began before the oldest sample kept


def _rose_each_tick(values: Sequence[Sample]) -> bool:
    return all(a is not None and b is not None and b > a for a, b in pairwise(values))


def _run_start(values: Sequence[float], times: Sequence[float], since: float | None) -> int:
    """Index where the present growth began: where the values began to rise tick after tick
    up to now, or, for an alert raised at ``since``, up to then (noise inside a growing queue
    since does not restart it)."""
    start = len(values) - 1
    if since is not None:
        start = next((k for k, t in enumerate(times) if t >= since), start)
    while start > 0 and values[start - 1] < values[start]:
        start -= 1
    return start


def _rose_sharply(i: AlertInputs, t: AlertThresholds, key: str) -> bool:
    """Rose in each of its last 2 (up to ``queue_growth_ticks``) ticks, by ``queue_growth_min``
    and ``queue_growth_pct`` of where it stood across them."""
    ticks = t.queue_growth_ticks
    tail = i.history.tail(key, ticks + 1)
    for k in range(min(2, ticks), ticks + 1):
        run = tail[len(tail) - k - 1 :]
        if len(run) < k + 1 or not _rose_each_tick(run):
            return False  # a shorter run already fell: a longer one holds the same fall
        first, last = run[0], run[-1]
        floor = max(t.queue_growth_min, t.queue_growth_pct / 100.0 * (first or 0.0))
        if first is not None and last is not None and last - first >= floor:
            return True
    return False


def _sharp(i: AlertInputs, t: AlertThresholds, stream: str) -> Growth | None:
    """A sharp rise now, measured since it began; None when there is none."""
    key = f"queue:{stream}:waiting"
    ticks = t.queue_growth_ticks
    newest = i.history.last(key)
    held = i.previous.get(f"{RULE}:{stream}")
    if held is not None and SHARP not in held.message:
        held = None  # raised by the steady trend: that one judges it
    if held is None:
        before = i.history.back(key, 1)
        if newest is None or before is None or newest <= before or not _rose_sharply(i, t, key):
            return None
    else:  # it holds while the count is above where it was ``ticks`` ago
        before = i.history.back(key, ticks)
        if newest is None or before is None or newest <= before:
            return None
    # the rise is measured from where it began, over the whole history the view holds
    times = i.history.times
    ts, vs = known_points(times, i.history.tail(key, len(times)))
    if len(vs) < 2:
        return None
    start = _run_start(vs, ts, None if held is None else held.since)
    span = ts[-1] - ts[start]
    if span <= 0.0:
        return None
    # a rise older than the history is measured from the history's start ("for 119+ ticks")
    clamped = start == 0 and held is not None and ts[0] > held.since
    return Growth((vs[-1] - vs[start]) / span, span, len(vs) - 1 - start, True, clamped)


def _steady(
    i: AlertInputs, t: AlertThresholds, stream: str, times: Sequence[float], n: int
) -> Growth | None:
    """A steady rise over the window (least squares); None when there is none."""
    key = f"queue:{stream}:waiting"
    newest = i.history.last(key)
    oldest = i.history.back(key, n - 1)
    if newest is None or (oldest is not None and newest <= oldest):
        return None
    ts, vs = known_points(times[len(times) - n :], i.history.tail(key, n))
    span = ts[-1] - ts[0] if ts else 0.0
    if span < t.queue_growth_window_s / 2:
        return None  # a short history: what a fit over it would call a trend is a few ticks
    rate = slope(ts, vs)
    if rate is None or rate < t.queue_growth_per_s:
        return None
    grown = rate * span  # across the window, by the fitted line
    if grown < t.queue_growth_pct / 100.0 * max(newest - grown, 1.0):
        return None
    return Growth(rate, span, n - 1, False, False)


def _models_waiting_longer(i: AlertInputs, ticks: int) -> str:
    """The models whose backends' queue time rose over the growth: "sd15 2.7 s, sdxl 1.9 s"."""
    worst: dict[str, float] = {}
    history = i.history
    # each backend's newest and older sample read off the family's two blocks (a key built
    # and looked up for each of thousands of backends took ~5 ms at 512 GPUs)
    now_of = history.family_back("backend", "queue_ms", 0)
    then_of = history.family_back("backend", "queue_ms", ticks)
    for name in i.latency:
        if now_of is None or then_of is None:
            key = f"backend:{name}:queue_ms"
            now_ms, then_ms = history.last(key), history.back(key, ticks)
        else:
            now_ms, then_ms = now_of(name), then_of(name)
        if now_ms is None or then_ms is None:
            continue
        if now_ms < 2.0 * then_ms or now_ms - then_ms < QUEUE_TIME_RISE_MS:
            continue
        b = i.backends.get(name)
        model = b.model if b is not None and b.model else name
        worst[model] = max(worst.get(model, 0.0), now_ms)
    if not worst:
        return ""
    named = sorted(worst.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{m} {fmt_ms(ms)}" for m, ms in named[:MODELS_NAMED])
    more = f" (+{len(named) - MODELS_NAMED})" if len(named) > MODELS_NAMED else ""
    return f"; queue time up: {shown}{more}"


def queue_growth(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    times = i.history.times
    n = ticks_within(times, i.now, t.queue_growth_window_s)
    if n < 3:
        return
    for stream, q in i.queues.items():
        newest = i.history.last(f"queue:{stream}:waiting")
        if newest is None or newest < t.queue_growth_min_waiting:
            continue
        found = _sharp(i, t, stream) or _steady(i, t, stream, times, n)
        if found is None:
            continue
        if found.sharp:
            trend = f"for {found.ticks}{'+' if found.clamped else ''}{SHARP}{found.span:.0f} s)"
        else:
            trend = f"over {found.span:.0f} s"
        wait = ""
        if q.oldest_age_s is not None:
            wait = f", oldest {fmt_wait(q.oldest_age_s)}"
            was = i.history.back(f"queue:{stream}:oldest", found.ticks)
            if was is not None and was < q.oldest_age_s:
                wait += f" (was {fmt_wait(was)})"
        yield (
            RULE,
            stream,
            Severity.WARNING,
            f"queue growing +{fmt(found.rate, '/s')} {trend}, {newest:.0f} waiting{wait}"
            f"{_models_waiting_longer(i, found.ticks)}",
        )
