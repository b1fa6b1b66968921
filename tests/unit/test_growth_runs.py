"""The slots' memory growth runs the hub keeps: the memory trend rule over them raises exactly
what it raises walking the history back, tick by tick, whatever the samples do."""

from __future__ import annotations

import math
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucon.hub import Hub
from gpucon.model.alert_base import Found
from gpucon.model.alerts import AlertInputs, AlertThresholds
from gpucon.model.early_warning import memory_trend
from gpucon.model.fleet import Slot, SlotKind
from gpucon.model.growth_runs import GrowthRuns
from gpucon.model.history import History
from gpucon.sim.source import SimSource

NAN = math.nan
IDS = ("a", "b", "c", "d")

# a sample: None (a gap), or MiB from a few levels (so equal samples, rises and drops all come)
samples = st.one_of(st.none(), st.sampled_from([0.0, 10.0, 10.0, 20.0, 35.5, 60.0, 90.0]))
ticks = st.tuples(
    st.sampled_from([0.5, 1.0, 1.0, 1.0, 2.5, 7.0]),  # seconds since the tick before
    st.sampled_from([IDS, IDS, IDS, IDS[:3], ("b", "a", "d")]),  # entities come and go
    st.lists(samples, min_size=4, max_size=4),
)
thresholds = st.builds(
    AlertThresholds,
    mem_trend_window_s=st.sampled_from([3.0, 6.0, 10.0, 60.0]),
    mem_trend_rises=st.integers(1, 4),
    mem_full_warn_s=st.sampled_from([5.0, 30.0, 1800.0, 1e9]),
    mem_full_crit_s=st.sampled_from([1.0, 10.0]),
    min_free_mem_mib=st.sampled_from([0.0, 15.0]),
)


def _alerts(
    now: float, h: History, slots: dict[str, Slot], runs: GrowthRuns | None, t: AlertThresholds
) -> list[Found]:
    i = AlertInputs(now, slots, {}, {}, {}, {}, h, mem_runs=runs)
    return list(memory_trend(i, t))


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(ticks, min_size=1, max_size=40),
    t=thresholds,
    capacity=st.sampled_from([4, 8, 120]),
    typecode=st.sampled_from("fd"),  # the hub's blocks are single precision
)
def test_runs_raise_what_the_walk_back_raises(
    steps: list[tuple[float, tuple[str, ...], list[float | None]]],
    t: AlertThresholds,
    capacity: int,
    typecode: str,
) -> None:
    h = History(capacity=capacity)
    runs = GrowthRuns(capacity)
    now = 1_790_000_000.0
    for dt, ids, values in steps:
        now += dt
        block = array(typecode, [NAN if v is None else v for v in values[: len(ids)]])
        h = h.append_blocks(now, [("slot", "mem_used", ids, block)], {})
        runs.update(h.appended - 1, now, ids, block)
        slots = {
            sid: Slot(sid, SlotKind.MIG, mem_used_mib=v, mem_total_mib=100.0)
            for sid, v in zip(ids, values, strict=False)
        }
        assert _alerts(now, h, slots, runs, t) == _alerts(now, h, slots, None, t)


def test_a_steady_leak_alerts_through_the_runs_once_and_after_a_drop_again() -> None:
    t = AlertThresholds()
    h = History(capacity=120)
    runs = GrowthRuns(120)
    slots = {"s": Slot("s", SlotKind.MIG, mem_total_mib=80_000.0)}
    raised: list[int] = []
    for k in range(90):
        used = 10_000.0 + 40.0 * (k % 45)  # +40 MiB/s, back to 10 GB at 45 s
        h = h.append_blocks(float(k), [("slot", "mem_used", ("s",), array("d", [used]))], {})
        runs.update(h.appended - 1, float(k), ("s",), array("d", [used]))
        found = _alerts(float(k), h, slots, runs, t)
        assert found == _alerts(float(k), h, slots, None, t)
        if found:
            raised.append(k)
    # three rises in, until the drop at 45 s, and again three rises after it
    assert raised[0] == 3 and 44 in raised and 45 not in raised and 48 in raised


def test_the_hub_keeps_the_runs_at_its_history_tick() -> None:
    clock = [1_790_000_000.0]
    hub = Hub([SimSource.for_demo(7, None, None, clock=lambda: clock[0])], clock=lambda: clock[0])
    for _ in range(5):
        clock[0] += 1.0
        hub.poll_once()
        snapshot = hub.tick()
    assert hub._mem_runs.tick == snapshot.history.appended - 1
    assert set(hub._mem_runs.ids) == set(snapshot.slots)


def test_a_missed_tick_starts_the_runs_again_from_there() -> None:
    runs = GrowthRuns(120)
    for k in range(6):
        runs.update(k, float(k), ("s",), array("d", [float(k)]))
    assert runs.runs and runs.first_tick == 0
    runs.update(7, 7.0, ("s",), array("d", [9.0]))  # tick 6 never came
    assert not runs.runs and runs.first_tick == 7 and runs.tick == 7


class _Walking(GrowthRuns):
    """The book with its every-series-moved loop, its streaks of ticks where every series rose
    and its every-series-fell shortcut replaced by the general walk."""

    def _all_rose_or_fell(self, tick: int, t: float, values: array[float]) -> None:
        self._visit(tick, t, values, range(len(values)))

    def _rose(self, tick: int, t: float, values: array[float]) -> None:
        self._visit(tick, t, values, range(len(values)))

    def _fell(self, values: array[float]) -> None:
        self._visit(
            self.tick, self._times[self.tick % len(self._times)], values, range(len(values))
        )


def _state(runs: GrowthRuns) -> tuple[object, ...]:
    kept = {
        i: (r.begin, r.t0, r.v0, r.n, r.st, r.sv, r.stt, r.stv, list(r.preds), r.last_rise)
        for i, r in runs.runs.items()
    }
    # NaN (no value yet) compared as a string: NaN is unequal to itself
    return ([repr(v) for v in runs.last], repr(kept), dict(runs.gapped), runs.tick)


def _same_runs(quick: GrowthRuns, walking: GrowthRuns) -> bool:
    """The same runs, rises and last values; the sums equal to rounding (a streak's are summed
    in closed form, the walk's one tick at a time)."""
    a, b = quick.runs, walking.runs
    if a.keys() != b.keys() or [repr(v) for v in quick.last] != [repr(v) for v in walking.last]:
        return False
    for i, r in a.items():
        w = b[i]
        if (r.begin, repr(r.t0), r.v0, r.n, r.preds, r.last_rise) != (
            w.begin,
            repr(w.t0),
            w.v0,
            w.n,
            w.preds,
            w.last_rise,
        ):
            return False
        for x, y in ((r.st, w.st), (r.sv, w.sv), (r.stt, w.stt), (r.stv, w.stv)):
            if not (math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6) or (x != x and y != y)):
                return False
    return quick.gapped == walking.gapped and quick.tick == walking.tick


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["moved", "moved", "moved", "any"]),
            st.lists(st.sampled_from([-2.0, -0.5, 0.5, 1.0, 3.0]), min_size=6, max_size=6),
            st.lists(samples, min_size=6, max_size=6),
        ),
        min_size=1,
        max_size=60,
    ),
    capacity=st.sampled_from([4, 8, 120]),
)
def test_every_series_moved_keeps_the_runs_the_walk_keeps(
    steps: list[tuple[str, list[float], list[float | None]]], capacity: int
) -> None:
    """Ticks where every series rose or fell (a live fleet with every value changing), now
    and then one with gaps or equal values: the book's state after each tick is the one the
    general walk of every series leaves."""
    ids = tuple("abcdef")
    quick, walking = GrowthRuns(capacity), _Walking(capacity)
    level = [50.0] * 6
    for tick, (kind, deltas, anything) in enumerate(steps):
        if kind == "moved":  # each value rises or falls from the last
            level = [v + d for v, d in zip(level, deltas, strict=True)]
            values: list[float | None] = list(level)
        else:  # gaps, equal values, anything
            values = anything
        block = array("f", [NAN if v is None else v for v in values])
        for book in (quick, walking):
            book.update(tick, 1_790_000_000.0 + tick, ids, block)
        assert _state(quick) == _state(walking), tick


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from([0.5, 1.0, 1.0, 2.0]),  # seconds since the tick before
            # each series' change: every one moves (the book's bound on the rises is kept)
            st.lists(
                st.sampled_from([-0.3, 0.1, 0.4, 0.7, 1.6, 3.0, 45.0]), min_size=5, max_size=5
            ),
        ),
        min_size=1,
        max_size=60,
    ),
    t=st.builds(
        AlertThresholds,
        mem_trend_window_s=st.sampled_from([6.0, 60.0]),
        mem_trend_rises=st.integers(1, 3),
        mem_full_warn_s=st.sampled_from([60.0, 1800.0]),
        mem_full_crit_s=st.just(30.0),
        min_free_mem_mib=st.sampled_from([0.0, 50.0, 1536.0]),
    ),
    typecode=st.sampled_from("fd"),
)
def test_the_bound_on_the_rises_lets_off_only_what_the_walk_lets_off(
    steps: list[tuple[float, list[float]]], t: AlertThresholds, typecode: str
) -> None:
    """Every series creeping up or down each tick, some near the steepest rise at which a
    slot with ``min_free_mem_mib`` free fills within the warning's horizon: a window whose
    rises all stay under it is let off whole, and the alerts are the walk back's."""
    ids = tuple("abcde")
    h = History(capacity=120)
    runs = GrowthRuns(120)
    now = 1_790_000_000.0
    level = [70_000.0, 30_000.0, 10_000.0, 79_000.0, 500.0]
    for dt, deltas in steps:
        now += dt
        level = [v + d for v, d in zip(level, deltas, strict=True)]
        block = array(typecode, level)
        h = h.append_blocks(now, [("slot", "mem_used", ids, block)], {})
        runs.update(h.appended - 1, now, ids, block)
        slots = {
            sid: Slot(sid, SlotKind.MIG, mem_used_mib=v, mem_total_mib=81_920.0)
            for sid, v in zip(ids, block, strict=True)
        }
        assert _alerts(now, h, slots, runs, t) == _alerts(now, h, slots, None, t)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            # most ticks every series rises; now and then all fall, some fall, or the runs
            # are read (a rule that could not let the window off)
            st.sampled_from(["rise", "rise", "rise", "rise", "fall", "mixed", "read"]),
            st.lists(st.sampled_from([0.1, 0.5, 1.0, 3.0, 250.0]), min_size=5, max_size=5),
            st.sampled_from([0.5, 1.0, 1.0, 2.0]),
        ),
        min_size=1,
        max_size=80,
    ),
    capacity=st.sampled_from([1, 3, 8, 120]),
)
def test_a_streak_of_rises_leaves_the_runs_the_walk_leaves(
    steps: list[tuple[str, list[float], float]], capacity: int
) -> None:
    """Every slot's memory creeping up tick after tick (kept as a streak and brought up to
    date only when read), with ticks where every series fell or some did, runs read at any
    tick, and streaks longer than a run's horizon: the runs read are the walk's."""
    ids = tuple("abcde")
    quick, walking = GrowthRuns(capacity), _Walking(capacity)
    level = [70_000.0, 30_000.5, 1_000.0, 79_000.0, 512.25]
    now = 1_790_000_000.0
    for tick, (kind, deltas, dt) in enumerate(steps):
        now += dt
        if kind == "fall":
            level = [v - d for v, d in zip(level, deltas, strict=True)]
        elif kind == "mixed":
            level = [
                v + (d if k % 2 else -d) for k, (v, d) in enumerate(zip(level, deltas, strict=True))
            ]
        else:
            level = [v + d for v, d in zip(level, deltas, strict=True)]
        block = array("f", level)
        for book in (quick, walking):
            book.update(tick, now, ids, block)
        if kind == "read":
            assert _same_runs(quick, walking), tick
    assert _same_runs(quick, walking)


def test_the_bound_on_the_rises_is_the_steepest_rise_in_the_window() -> None:
    runs = GrowthRuns(120)
    for k, (a, b) in enumerate([(10.0, 20.0), (10.5, 20.25), (11.0, 20.0), (11.0, 22.0)]):
        runs.update(k, 2.0 * k, ("a", "b"), array("d", [a, b]))
    # tick 3: "a" flat, so not every series moved: its bound is not known
    assert runs.rise_bound(2) == math.inf
    assert runs.rise_bound(0) == math.inf  # the window reaches tick 3 too
    runs.update(4, 8.0, ("a", "b"), array("d", [12.0, 21.0]))
    assert runs.rise_bound(3) == pytest.approx(0.5, abs=1e-6)  # (12 - 11) / 2 s
    fresh = GrowthRuns(120)
    for k, (a, b) in enumerate([(10.0, 20.0), (10.5, 20.25), (11.0, 20.0)]):
        fresh.update(k, 2.0 * k, ("a", "b"), array("d", [a, b]))
    # ticks 1 and 2: +0.5 MiB in 2 s at most (a window's first tick needs no tick before it)
    assert fresh.rise_bound(0) == pytest.approx(0.25, abs=1e-6)
    assert fresh.rise_bound(2) == 0.0  # a window of one tick: no rise in it
    assert fresh.rise_bound(-1) == math.inf  # before the book began


def test_a_value_beyond_single_precision_leaves_its_tick_unknown() -> None:
    """An infinity minus an infinity is no number: a steep rise beside it is not lost."""
    runs = GrowthRuns(120)
    inf = math.inf
    for k, (a, b) in enumerate([(inf, 10.0), (inf, 20.0), (inf, 5_000.0), (inf, 5_001.0)]):
        runs.update(k, float(k), ("a", "b"), array("f", [a, b]))
    assert runs.rise_bound(0) == math.inf
    assert runs.rise_bound(2) == math.inf
