"""History rings against a plain reference model: bounded storage, values and order exact.

Hypothesis drives appends of random series (some absent, some gaps, some gone for good) and
checks every view the hub could still hand out (up to ``slack`` appends old) against a list of
dicts kept in full, and that no ring ever holds more than its fixed size.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpucon.model.history import History
from gpucon.model.history_rings import default_slack

KEYS = ("a", "b", "c", "d")

samples_strategy = st.dictionaries(
    st.sampled_from(KEYS),
    st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64)),
)


def reference(
    log: list[tuple[float, dict[str, float | None]]], capacity: int, key: str
) -> tuple[float | None, ...]:
    window = log[-capacity:]
    if not any(key in s for _, s in log):
        return ()
    return tuple(s.get(key) for _, s in window)


def check_view(
    view: History, log: list[tuple[float, dict[str, float | None]]], capacity: int
) -> None:
    window = log[-capacity:]
    assert view.times == tuple(t for t, _ in window)
    for key in KEYS:
        expected = reference(log, capacity, key)
        got = view.get(key)
        # () and all gaps say the same (a series not seen yet, or gone and dropped)
        assert len(got) in (0, len(window))
        assert (got or (None,) * len(window)) == (expected or (None,) * len(window))
        assert view.last(key) == (window[-1][1].get(key) if window else None)
        for ticks in (1, 3):
            assert view.tail(key, ticks) == got[len(got) - min(ticks, len(got)) :]
            if ticks < len(window):
                assert view.back(key, ticks) == window[-1 - ticks][1].get(key)
    for ticks in range(1, len(window)):
        risen = {
            k
            for k in KEYS
            if (new := window[-1][1].get(k)) is not None
            and (old := window[-1 - ticks][1].get(k)) is not None
            and new > old
        }
        assert set(view.rose(KEYS, ticks)) == risen


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(min_value=1, max_value=9),
    steps=st.lists(samples_strategy, min_size=1, max_size=60),
)
def test_views_match_a_reference_and_rings_stay_bounded(
    capacity: int, steps: list[dict[str, float | None]]
) -> None:
    history = History(capacity=capacity)
    slack = default_slack(capacity)
    log: list[tuple[float, dict[str, float | None]]] = []
    views: list[tuple[History, int]] = []
    for i, samples in enumerate(steps):
        history = history.append(float(i), samples)
        log.append((float(i), samples))
        views.append((history, len(log)))
        rings = history._columns
        assert rings is not None
        # the storage never exceeds its fixed size, whatever was appended
        assert len(rings.times) == capacity + slack + 1
        assert all(len(c) == capacity + slack + 1 for c in rings.columns.values())
        assert len(rings.columns) <= len(KEYS)
        # every view at most `slack` appends old still shows exactly what it showed
        for view, seen in views[-(slack + 1) :]:
            check_view(view, log[:seen], capacity)


@settings(max_examples=50, deadline=None)
@given(
    capacity=st.integers(min_value=1, max_value=6),
    before=st.lists(samples_strategy, min_size=1, max_size=20),
    after=st.lists(samples_strategy, min_size=1, max_size=40),
)
def test_a_frozen_view_stays_exact_and_branches_copy(
    capacity: int, before: list[dict[str, float | None]], after: list[dict[str, float | None]]
) -> None:
    history = History(capacity=capacity)
    log: list[tuple[float, dict[str, float | None]]] = []
    for i, samples in enumerate(before):
        history = history.append(float(i), samples)
        log.append((float(i), samples))
    kept = history.frozen()
    assert kept == history  # a copy shows what the view shows
    for j, samples in enumerate(after):
        history = history.append(100.0 + j, samples)
    check_view(kept, log, capacity)
    # appending to an older view branches off a copy; the live rings are left alone
    branch = kept.append(99.0, {"a": 1.5})
    check_view(branch, [*log, (99.0, {"a": 1.5})], capacity)
    assert history.times[-1] == 100.0 + len(after) - 1


def test_a_view_held_too_long_shows_gaps_not_other_ticks_values() -> None:
    history = History(capacity=4)
    history = history.append(0.0, {"k": 1.0})
    old = history
    for i in range(1, 40):
        history = history.append(float(i), {"k": float(i + 1000)})
    # its one tick was overwritten long ago: nothing of the newer ticks leaks into it
    assert old.last("k") is None
    assert all(v is None or v == 1.0 for v in old.get("k"))
    assert len(old.get("k")) == len(old.times)


def test_series_gone_for_a_whole_ring_are_dropped() -> None:
    history = History(capacity=3).append(0.0, {"gone": 1.0, "kept": 2.0})
    for i in range(1, 30):
        history = history.append(float(i), {"kept": 2.0})
    assert history.get("gone") == ()
    assert history.stored_series == 1


def test_the_hubs_family_blocks_read_as_single_series() -> None:
    """``history_blocks`` + ``append_blocks`` (the hub) and ``history_samples`` + ``append``
    (the generic path) keep the same samples, stale values as gaps included."""
    from array import array

    from msgspec.structs import replace

    from gpucon.model.history_samples import history_blocks, history_samples
    from gpucon.model.merge import merge_readings
    from gpucon.model.staleness import Staleness
    from gpucon.sim.fleet import build_sim_fleet

    fleet = build_sim_fleet(seed=3, size=16)
    by_blocks, by_keys = History(capacity=5), History(capacity=5)
    for tick in range(12):
        fleet.step(1.0)
        merged = merge_readings([fleet.reading(float(tick))])
        if tick == 7:  # a slot gone for a while, entities in another order
            sid = next(iter(merged.slots))
            slots = {k: v for k, v in reversed(merged.slots.items()) if k != sid}
            merged = replace(merged, slots=slots)
        slot = next(iter(merged.slots))
        backend = next(iter(merged.latency))
        stale = Staleness(
            {"sim": 9.0},
            {f"slot:{slot}": {"activity_pct": "sim"}, f"latency:{backend}": {"p95_ms": "sim"}},
        )
        staleness = stale if tick % 3 == 0 else Staleness()
        blocks, single = history_blocks(merged, staleness)
        by_blocks = by_blocks.append_blocks(float(tick), blocks, single)
        # the hub's families keep single precision: the same samples, rounded so
        single_precision = {
            k: None if v is None else array("f", [v])[0]
            for k, v in history_samples(merged, staleness).items()
        }
        by_keys = by_keys.append(float(tick), single_precision)
        assert by_blocks == by_keys
        assert by_blocks.stored_series == len(history_samples(merged))
        keys = list(history_samples(merged))
        for ticks in (1, 2, 4):
            assert by_blocks.rose(keys, ticks) == by_keys.rose(keys, ticks)
        for key in keys[::7]:
            assert by_blocks.get(key) == by_keys.get(key)
            assert by_blocks.last(key) == by_keys.last(key)
            assert by_blocks.back(key, 2) == by_keys.back(key, 2)
        for kind, series, above in (("slot", "activity", 50.0), ("backend", "p95", 100.0)):
            hits = by_blocks.newest_at_least(kind, series, above)
            wanted = {
                k.split(":")[1]
                for k in keys
                if k.startswith(f"{kind}:") and k.endswith(f":{series}")
                if (v := by_blocks.last(k)) is not None and v >= above
            }
            assert hits == frozenset(wanted)
            assert by_keys.newest_at_least(kind, series, above) is None
        for back in (0, 2, 4, 9):
            sample = by_blocks.family_back("backend", "p95", back)
            assert sample is not None and by_keys.family_back("backend", "p95", back) is None
            for name in [*merged.latency, "no-such-backend"]:
                assert sample(name) == by_blocks.back(f"backend:{name}:p95", back)
        if tick % 3 == 0:
            assert by_blocks.last(f"slot:{slot}:activity") is None
            assert by_blocks.last(f"backend:{backend}:p95") is None
    assert by_blocks.frozen() == by_keys
    assert by_blocks.get("slot:no-such-slot:activity") == ()


def test_a_frozen_family_is_copied_whole_and_alone() -> None:
    from array import array

    h = History(capacity=3)
    for t in range(5):
        blocks = [
            ("slot", "activity", ("s1", "s2"), array("d", [t, t + 0.5])),
            ("slot", "mem_used", ("s1", "s2"), array("d", [100.0, 200.0])),
        ]
        h = h.append_blocks(float(t), blocks, {"other": 1.0})
    kept = h.frozen({("slot", "activity")})
    for t in range(5, 30):
        h = h.append_blocks(float(t), [], {})
    assert kept.get("slot:s2:activity") == (2.5, 3.5, 4.5)
    assert kept.times == (2.0, 3.0, 4.0)
    assert kept.get("slot:s1:mem_used") == () and kept.get("other") == ()
