"""Each series' newest growth run, kept up to date as the hub appends a tick: what the memory
trend rule needs, in O(1) a series a tick instead of a walk back through the history.

A series' run is its newest stretch of known samples that never drops (gaps skipped), from the
last sample before its first rise (equal samples before that are skipped): the points
``model.early_warning`` fits a line to. For a run that has risen the book keeps the tick before
each rise (so a rule counts the rises inside its window by bisection), the newest rise's tick,
and least-squares sums of its points (time and value taken relative to its first point, so the
sums stay exact enough), so a rule can tell in O(1) how often a series rose in its window, when
it last rose and, roughly, how fast. A run that has not risen costs nothing: a tick compares
each new value with the last one in one comprehension and visits only those that moved, had a
gap or are in a run.

For each tick where every series moved and none was in a gap, the book also keeps the
steepest rise of any series since the tick before (per second, in C over the block): the
least-squares slope of samples that never drop is at most their steepest step, so a rule can
tell in O(window) that no series in a window rose fast enough to matter (``rise_bound``).

The book only narrows the search: the memory trend rule fits the few series it cannot reject
again from the history itself, so its alerts are exactly those of the walk back. A run with no
rise for ``horizon`` ticks (the most a window can cover: the history's capacity) is forgotten.
A run that began more than ``horizon`` ticks ago begins before any window, so the rule never
reads its sums again (only its rises and its newest rise): they are no longer added to, which
halves the work of a tick where every slot's memory rose and every run is that old.

A stretch of ticks where every series rose (every slot's memory creeping up: a live fleet at
its worst) is kept as a streak (``_Streak``): each tick adds its values to two sums per series
in C (the values, and the values times the time), and no series is visited. Each run's rises
in the streak are the ticks themselves and its sums follow from the streak's in closed form,
so the runs are brought up to date in one walk when something reads them (``runs``), when a
tick is not such a tick, or when a run would stop adding to its sums (its horizon). A tick
where every series fell ends every run: the streak is dropped unread. The closed-form sums
equal the running ones to rounding (~1e-10 of them): the rule lets a run off by its sums only
with a margin of 1e-4 and fits the rest from the history.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import compress
from operator import add, ge, le, mul, ne, sub

NAN = math.nan
INF = math.inf
# what a tick's bound on the rises adds per MiB of the largest value: more than any rounding
# of a least-squares slope fitted to those values in double precision (~1e-13 of it)
_ROUNDING_SLACK = 1e-9


class Run:
    """One series' run since its first rise: its points' sums and where it rose."""

    __slots__ = ("begin", "last_rise", "n", "preds", "st", "stt", "stv", "sv", "t0", "v0")

    def __init__(self, tick0: int, t0: float, v0: float) -> None:
        self.begin = tick0  # the run's first point: the last sample before its first rise
        self.t0 = t0
        self.v0 = v0
        self.n = 1
        self.st = self.sv = self.stt = self.stv = 0.0  # of (t - t0, v - v0): the first is 0
        self.preds: list[int] = []  # for each rise, the tick of the known sample before it
        self.last_rise = tick0

    def add(
        self, tick: int, t: float, v: float, horizon: int, rose_from: int | None = None
    ) -> None:
        """Take tick ``tick``'s point ``(t, v)``: into the sums while a window may hold the run
        (it began at ``horizon`` or later). ``rose_from``: the point rose from the known sample
        at that tick, a rise kept with those a window still reaches. (One call a point, the
        sums inline: ``update``'s loops call it for every slot that rose.)"""
        if self.begin >= horizon:
            x = t - self.t0
            y = v - self.v0
            self.n += 1
            self.st += x
            self.sv += y
            self.stt += x * x
            self.stv += x * y
        if rose_from is None:
            return
        preds = self.preds
        preds.append(rose_from)
        self.last_rise = tick
        if preds[0] < horizon:  # rises no window reaches any more
            del preds[: bisect_left(preds, horizon)]

    def rises_since(self, tick: int) -> int:
        """How many rises whose sample before lies at ``tick`` or later."""
        return len(self.preds) - bisect_left(self.preds, tick)

    def rate(self) -> float | None:
        """The least-squares slope of the run's points (per second); None under 2 times.
        (``model.early_warning`` writes the same arithmetic out in its loop.)"""
        n = self.n
        sxx = self.stt - self.st * self.st / n
        if n < 2 or sxx <= 0.0:
            return None
        return (self.stv - self.st * self.sv / n) / sxx


class _Streak:
    """Ticks ``first`` to ``newest`` in a row where every series rose: per series the sum of its
    values and of its values times (time - ``ref``), and the same of the times alone."""

    __slots__ = ("before", "first", "last_tick", "newest", "ref", "stv", "sv", "sx", "sxx")

    def __init__(self, tick: int, ref: float, before: array[float], last_tick: int) -> None:
        self.first = tick
        self.newest = tick - 1  # no tick taken yet (``add``)
        self.ref = ref  # the time of the tick before the first: new runs' first point
        self.before = before  # each series' value at the tick before the first
        self.last_tick = last_tick  # the last tick every run's sums may still take
        self.sx = self.sxx = 0.0
        self.sv = array("d", [0.0]) * len(before)
        self.stv = array("d", [0.0]) * len(before)

    def add(self, tick: int, t: float, values: array[float]) -> None:
        x = t - self.ref
        self.newest = tick
        self.sx += x
        self.sxx += x * x
        self.sv = array("d", map(add, self.sv, values))  # in C
        self.stv = array("d", map(add, self.stv, map(mul, values, [x] * len(values))))


class GrowthRuns:
    """The runs of one family of series (a block of values per tick, ``update``)."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self._reset()

    def _reset(self) -> None:
        horizon = self.horizon
        self.tick = -1  # the newest tick seen
        self.first_tick = -1  # the first tick seen: windows reaching before it are not known
        self.ids: Sequence[str] = ()
        self._pos: dict[str, int] = {}
        self._times = array("d", [NAN]) * (horizon + 2)  # the times of the newest ticks
        # for each of the newest ticks, a bound on every series' rise since the tick before,
        # per second (INF: not known, e.g. a series came back from a gap): ``rise_bound``
        self._rises = array("d", [INF]) * (horizon + 2)
        self.last = array("d")  # each series' last known value (NaN: none yet)
        self.gapped: dict[int, int] = {}  # series in a gap -> the tick of their last value
        self._runs: dict[int, Run] = {}  # series (by position) in a run that has risen
        self._streak: _Streak | None = None  # the ticks in a row where every series rose
        self._read_at = -2  # the newest tick at which ``runs`` was read
        # entities gone from the block: (last value, run, tick of that value), by id
        self._gone: dict[str, tuple[float, Run | None, int]] = {}

    @property
    def runs(self) -> dict[int, Run]:
        """Series (by position) in a run that has risen, brought up to the newest tick."""
        self._settle()
        self._read_at = self.tick
        return self._runs

    def _remap(self, ids: Sequence[str]) -> None:
        """Entities came or went: carry each one's state to its new position. One gone is
        kept for ``horizon`` ticks: the history reads its absence as gaps, and so do we."""
        self._settle()
        old = self._pos
        gone = self._gone
        for ident, j in old.items():
            # not in a gap before: its last value was at the last tick
            gone[ident] = (self.last[j], self._runs.get(j), self.gapped.get(j, self.tick))
        pos = {ident: i for i, ident in enumerate(ids)}
        last = array("d", [NAN]) * len(ids)
        runs: dict[int, Run] = {}
        gapped: dict[int, int] = {}
        for ident, i in pos.items():
            state = gone.pop(ident, None)
            if state is None:
                continue
            last[i], run, pred = state
            if run is not None:
                runs[i] = run
            if last[i] == last[i]:
                gapped[i] = pred
        horizon = self.tick - self.horizon
        self._gone = {k: v for k, v in gone.items() if v[2] >= horizon}
        self.ids, self._pos = ids, pos
        self.last, self._runs, self.gapped = last, runs, gapped

    def update(self, tick: int, t: float, ids: Sequence[str], values: array[float]) -> None:
        """Take tick ``tick`` (time ``t``): ``values[i]`` is ``ids[i]``'s sample (NaN a gap)."""
        if self.tick >= 0 and tick != self.tick + 1:  # a tick missed: start again from here
            self._reset()
        if self.first_tick < 0:
            self.first_tick = tick
        same = ids == self.ids and self.tick == tick - 1
        if ids != self.ids:
            self._remap(ids)
        self.tick = tick
        times = self._times
        size = len(times)
        times[tick % size] = t
        self._rises[tick % size] = INF
        last, runs, gapped = self.last, self._runs, self.gapped
        # the series whose value moved (NaN != anything: a gap, or no value yet, "moved");
        # an equal value changes nothing unless the series is in a run or a gap
        count = len(values)
        visit: Iterable[int]
        # ``all`` stops at the first equal value (in C): most ticks of a calm fleet there
        if not gapped and all(map(ne, values, last)) and values == values:
            # every series moved, none in a gap, no new gap (an array with a NaN is unequal
            # to itself): a live fleet at its worst, each one taken in a loop with no gap to
            # handle, and the new values kept in one copy
            if same and last == last:  # every series had a value at the tick before
                self._bound_rises(tick, t, values)
                # every series rose (in C), and the runs were not read at the tick before
                # (a rule reading them each tick walks them each tick: the loop below)
                if count and self._read_at < tick - 1 and not any(map(le, values, last)):
                    self._rose(tick, t, values)
                    return
                if count and not any(map(ge, values, last)):  # every series fell
                    self._fell(values)
                    return
            self._settle()
            self._all_rose_or_fell(tick, t, values)
            return
        self._settle()
        moved = list(compress(range(count), map(ne, values, last)))  # in C
        if len(moved) == count:  # every series moved (a live fleet at its worst): all of them
            visit = range(count)
        else:
            visit = set(moved)
            visit.update(runs)
            visit.update(gapped)
        self._visit(tick, t, values, visit)

    def _visit(self, tick: int, t: float, values: array[float], visit: Iterable[int]) -> None:
        """``update``'s walk of the series in ``visit``: gaps, rises, drops and flat runs."""
        times = self._times
        size = len(times)
        last, runs, gapped = self.last, self._runs, self.gapped
        horizon = tick - self.horizon
        before = tick - 1
        for i in visit:
            v = values[i]
            w = last[i]
            if v != v:  # a gap: the run goes on past it
                if i not in gapped and w == w:
                    gapped[i] = before  # not in a gap before: the last tick had a value
                continue
            # the tick of the known sample before this one (no series in a gap: the last)
            pred = gapped.pop(i, before) if gapped else before
            run = runs.get(i)
            if w != w:  # the series' first known sample
                pass
            elif v > w:
                if run is None:
                    t0 = times[pred % size] if pred > tick - size else NAN
                    run = runs[i] = Run(pred, t0, w)
                run.add(tick, t, v, horizon, pred)
            elif v < w:
                if run is not None:
                    del runs[i]  # a drop ends the run
            elif run is not None:
                if run.last_rise < horizon:
                    del runs[i]  # flat longer than any window: nothing left to fit
                else:
                    run.add(tick, t, v, horizon)
            last[i] = v

    def _bound_rises(self, tick: int, t: float, values: array[float]) -> None:
        """Note the most any series rose since the tick before, per second (in C: three
        passes over the block), plus a rounding slack in proportion to the largest value."""
        dt = t - self._times[(tick - 1) % len(self._times)]
        if not dt > 0.0 or not values:
            return
        big = max(max(values), -min(values))
        if not big < INF:  # an infinity (a value beyond single precision): left unknown
            return
        # neither array holds a NaN or an infinity: every difference is a number
        top = max(map(sub, values, self.last))
        self._rises[tick % len(self._rises)] = max(top, 0.0) / dt + _ROUNDING_SLACK * big

    def rise_bound(self, first: int) -> float:
        """A bound on the slope (per second) of any line fitted to a stretch of one series'
        samples that never drops, within ticks ``first`` to the newest: the least-squares
        slope of such samples is a weighted mean of the slopes between neighbours, none above
        the steepest rise of any series between two neighbouring ticks. INF where a tick in
        the window is not known or had a series in a gap."""
        if first < self.first_tick or self.tick - first >= len(self._rises):
            return INF
        size = len(self._rises)
        rises = self._rises
        return max([rises[k % size] for k in range(first + 1, self.tick + 1)], default=0.0)

    def _all_rose_or_fell(self, tick: int, t: float, values: array[float]) -> None:
        """``update``'s loop when every series moved and none is or was in a gap: each value
        rose (a run begins or goes on), fell (its run ends) or is the series' first."""
        times = self._times
        size = len(times)
        runs = self._runs
        horizon = tick - self.horizon
        pred = tick - 1  # no series in a gap: the known sample before is the last tick's
        t0_new = times[pred % size] if pred > tick - size else NAN
        for i, v, w in zip(range(len(values)), values, self.last, strict=True):
            if v > w:
                run = runs.get(i)
                if run is None:
                    run = runs[i] = Run(pred, t0_new, w)
                run.add(tick, t, v, horizon, pred)
            elif v < w:
                runs.pop(i, None)  # a drop ends the run
            # else: the series' first known sample (the last one unknown): nothing to fit
        self.last = array("d", values)

    def _rose(self, tick: int, t: float, values: array[float]) -> None:
        """A tick where every series rose: added to the streak (a new one if none, or if a
        run's sums would stop taking ticks within the one there is)."""
        streak = self._streak
        if streak is not None and tick > streak.last_tick:
            self._settle()
            streak = None
        if streak is None:
            pred = tick - 1
            size = len(self._times)
            ref = self._times[pred % size] if pred > tick - size else NAN
            # a run takes a tick into its sums while it began within the horizon before it
            # (``_visit``): the streak lasts no longer than the earliest of those runs does
            horizon = tick - self.horizon
            # (new runs begin at ``pred``)
            begins = [run.begin for run in self._runs.values() if run.begin >= horizon]
            last_tick = min(min(begins, default=pred), pred) + self.horizon
            streak = self._streak = _Streak(tick, ref, self.last, last_tick)
        streak.add(tick, t, values)
        self.last = array("d", values)

    def _fell(self, values: array[float]) -> None:
        """A tick where every series fell: every run ends (a streak with them, unread)."""
        self._streak = None
        self._runs.clear()
        self.last = array("d", values)

    def _settle(self) -> None:
        """Bring every run up to the streak's newest tick (one walk), and drop the streak."""
        streak = self._streak
        if streak is None:
            return
        self._streak = None
        first, newest = streak.first, streak.newest
        if newest < first:
            return
        count = newest - first + 1
        sx, sxx, ref = streak.sx, streak.sxx, streak.ref
        runs = self._runs
        pred = first - 1
        begun = first - self.horizon  # a run that began before this takes no sums
        horizon = newest - self.horizon  # rises no window reaches any more
        rises = list(range(pred, newest))  # each tick's sample before it
        for i, (v0, sv, stv) in enumerate(zip(streak.before, streak.sv, streak.stv, strict=True)):
            run = runs.get(i)
            if run is None:
                run = runs[i] = Run(pred, ref, v0)
            if run.begin >= begun:
                # the sums of (t - t0, v - v0) over the streak's ticks, from its sums of v
                # and (t - ref) * v: t - t0 = (t - ref) + d
                d = ref - run.t0
                w0 = run.v0
                y = sv - count * w0
                run.n += count
                run.st += sx + count * d
                run.sv += y
                run.stt += sxx + 2.0 * d * sx + count * d * d
                run.stv += stv - w0 * sx + d * y
            preds = run.preds
            preds += rises
            run.last_rise = newest
            if preds[0] < horizon:
                del preds[: bisect_left(preds, horizon)]

    @property
    def ring_times(self) -> array[float]:
        """The times of the newest ticks, tick ``k``'s at ``k % len(ring_times)`` (a rule's
        loop over every run reads them without a call a run)."""
        return self._times

    def time_of(self, tick: int) -> float:
        """The time of one of the newest ``horizon`` ticks."""
        return self._times[tick % len(self._times)]
