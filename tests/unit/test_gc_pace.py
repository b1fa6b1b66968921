"""The console's cyclic collector runs on the hub's thread between ticks (``gc_pace``).

The automatic threshold is raised to a backstop and the hub's thread, just before each tick
and only while the UI is idle, runs the collection the allocation counters call for. These
tests check that it collects when due and only then, that it leaves a collector that is off
alone, and that cyclic garbage made every tick does not pile up while a hub ticks.
"""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections.abc import Iterator

import pytest

from gpucon.commands import gc_pace
from gpucon.hub import Hub
from gpucon.model.snapshot import Snapshot
from tests.unit.test_hub_ui_yield import OneSlot

# objects kept beyond the threshold: a thread left by an earlier test that frees a few
# containers meanwhile counts them off the young generation (one run read 149,994)
KEPT_MARGIN = 10_000


@pytest.fixture
def paced() -> Iterator[None]:
    """The collector as the console sets it after its first frame (restored after)."""
    was_on, thresholds = gc.isenabled(), gc.get_threshold()
    gc.collect()
    gc.set_threshold(gc_pace.BACKSTOP_YOUNG, gc_pace.MIDDLE_THRESHOLD, gc_pace.OLD_THRESHOLD)
    gc.enable()
    yield
    gc.set_threshold(*thresholds)
    if not was_on:
        gc.disable()


class Knot:
    """One piece of cyclic garbage (it refers to itself); counts how many are alive."""

    alive = 0
    lock = threading.Lock()

    def __init__(self) -> None:
        self.me = self
        with Knot.lock:
            Knot.alive += 1

    def __del__(self) -> None:
        with Knot.lock:
            Knot.alive -= 1


@pytest.mark.usefixtures("paced")
def test_it_collects_only_once_enough_was_allocated() -> None:
    assert gc_pace.collect_between_ticks() is None  # just collected: nothing due
    # tracked objects, kept alive
    kept: list[list[int]] = [[] for _ in range(gc_pace.YOUNG_THRESHOLD + KEPT_MARGIN)]
    assert gc.get_count()[0] >= gc_pace.YOUNG_THRESHOLD
    assert gc_pace.collect_between_ticks() == 0
    assert gc.get_count()[0] < gc_pace.YOUNG_THRESHOLD
    del kept


@pytest.mark.usefixtures("paced")
def test_it_leaves_a_collector_that_is_off_alone() -> None:
    gc.disable()  # start-up, or a key being answered
    kept: list[list[int]] = [[] for _ in range(gc_pace.YOUNG_THRESHOLD + KEPT_MARGIN)]
    assert gc_pace.collect_between_ticks() is None
    assert gc.get_count()[0] >= gc_pace.YOUNG_THRESHOLD
    del kept


@pytest.mark.usefixtures("paced")
def test_cyclic_garbage_made_every_tick_does_not_pile_up() -> None:
    per_tick = gc_pace.YOUNG_THRESHOLD // 4  # below the backstop: only the hub collects it
    ticks = itertools.count()
    peak: list[int] = []
    done = threading.Event()

    def on_snapshot(snapshot: Snapshot) -> None:
        for _ in range(per_tick):
            Knot()
        peak.append(Knot.alive)
        if next(ticks) >= 24:
            done.set()

    hub = Hub([OneSlot()], refresh_s=0.02)
    hub.between_ticks = gc_pace.collect_between_ticks
    hub.start(on_snapshot)
    try:
        assert done.wait(60.0), "the hub did not tick 25 times"
    finally:
        hub.stop()
    # 25 ticks made 25 x per_tick knots; a collection every few ticks keeps at most a few
    # ticks' worth alive, as many late in the run as early
    assert max(peak) <= 6 * per_tick
    assert max(peak[-8:]) <= max(peak[:12]) + per_tick
    gc.collect()
    assert Knot.alive == 0


@pytest.mark.usefixtures("paced")
def test_the_hub_does_not_collect_while_the_ui_answers_a_key() -> None:
    calls: list[float] = []
    hub = Hub([OneSlot()], refresh_s=0.02)
    hub.between_ticks = lambda: calls.append(time.monotonic())
    hub.ui_idle.clear()
    ticked = threading.Event()
    hub.start(lambda snapshot: ticked.set())
    try:
        assert ticked.wait(10.0)
        assert calls == []
        hub.ui_idle.set()
        deadline = time.monotonic() + 10.0
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert calls
    finally:
        hub.stop()
