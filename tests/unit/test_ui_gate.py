"""What waits for a key being answered, and for how long (``hub.UiGate``).

A tick, a source's read (``give_way``) and the UI's tick preparation each get a gate that
waits while the UI answers a key, at most ``UI_WAIT_S`` of waiting in all: the budget counts
time spent waiting, so a tick that ran long on a loaded machine still gives way to a key that
comes late in it. The hub's thread rests at least as long as its tick took, and the
console's collector waits for a pause in the typing.
"""

from __future__ import annotations

import gc
import itertools
import threading
import time

import pytest

from gpucon.commands import gc_pace
from gpucon.hub import UI_WAIT_S, Hub, UiGate
from gpucon.model.fleet import Health
from gpucon.model.merge import merge_readings
from gpucon.model.reading import Reading
from gpucon.model.snapshot import Snapshot
from gpucon.sim.source import SimSource
from gpucon.widgets.row_builder import RowBuilder
from gpucon.widgets.tick_prep import TickPrep
from tests.unit.test_gc_pace import KEPT_MARGIN, paced  # noqa: F401  (a fixture)
from tests.unit.test_hub_ui_yield import OneSlot


def test_a_gate_budget_counts_waiting_not_the_time_since_it_was_made() -> None:
    idle = threading.Event()
    idle.set()
    gate = UiGate(idle, budget_s=1.0)
    gate()
    time.sleep(1.2)  # longer than the budget, but nothing waited yet
    idle.clear()
    threading.Timer(0.1, idle.set).start()
    started = time.monotonic()
    gate()
    first = time.monotonic() - started
    assert first >= 0.08  # still gave way
    idle.clear()
    started = time.monotonic()
    gate()  # what is left of the budget
    gate()  # none left: at once
    waited = time.monotonic() - started
    assert 1.0 - first - 0.05 <= waited < 1.0 - first + 1.0


def test_an_idle_ui_never_holds_a_gate() -> None:
    idle = threading.Event()
    idle.set()
    gate = UiGate(idle)
    started = time.monotonic()
    for _ in range(1000):
        gate()
    assert time.monotonic() - started < UI_WAIT_S


class GivingWay:
    """A source whose read gives way once, and says how long that took."""

    name = "nvml"
    cadence_s = 10.0
    timeout_s = 5.0

    def __init__(self) -> None:
        self.give_way: object = None
        self.entered = threading.Event()
        self.waited: list[float] = []

    def read(self) -> Reading:
        gate = self.give_way
        assert callable(gate)  # the hub set it before the read
        self.entered.set()
        started = time.monotonic()
        gate()
        self.waited.append(time.monotonic() - started)
        return Reading(self.name, Health.OK, time.time())

    def close(self) -> None:
        pass


def test_the_hub_gives_a_read_a_gate_that_waits_while_a_key_is_answered() -> None:
    source = GivingWay()
    hub = Hub([source])
    hub.ui_idle.clear()
    hub.start_reading()
    try:
        assert source.entered.wait(10.0)
        time.sleep(0.15)  # the key is still being answered: the read waits
        hub.ui_idle.set()
        deadline = time.monotonic() + 10.0
        while not source.waited and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        hub.stop()
    assert source.waited and 0.1 <= source.waited[0] <= UI_WAIT_S + 1.0


def test_the_simulator_gives_way_between_its_steps() -> None:
    source = SimSource.for_demo(7, None, 16)
    calls: list[float] = []
    source.give_way = lambda: calls.append(time.monotonic())
    source.read()  # the first read reads out (two calls there), it steps nothing
    assert len(calls) == 2
    source.clock = lambda: time.time() + 1.0
    source.read()
    pools = len(source.fleet._world.pools)
    # after each pool's arrivals and after its service, in each of the step's ticks, then
    # once before the read-out and twice in it
    assert len(calls) > 5 and (len(calls) - 5) % (2 * pools) == 0


def test_the_merge_gives_way_between_its_steps_and_merges_the_same() -> None:
    source = SimSource.for_demo(7, "backend-down", 16)
    reading = source.read()
    calls: list[int] = []
    merged = merge_readings([reading], lambda: calls.append(1))
    assert len(calls) == 4
    assert merged == merge_readings([reading])


def test_tick_preparation_gives_way_before_its_steps() -> None:
    source = SimSource.for_demo(7, None, 16)
    hub = Hub([source])
    hub.poll_once()
    snapshot = hub.tick()
    prep = TickPrep(RowBuilder(2500.0))
    calls: list[int] = []
    prep.prepare(snapshot, lambda: calls.append(prep.prepared))
    assert len(calls) >= 3 and prep.prepared == 1 and calls[-1] == 0  # before, not after
    prep.held = True
    prep.prepare(snapshot, lambda: calls.append(-1))
    assert -1 not in calls


def test_the_hub_rests_as_long_as_its_tick_took() -> None:
    hub = Hub([OneSlot()], refresh_s=0.02)
    got: list[tuple[float, Snapshot]] = []

    def slow(snapshot: Snapshot) -> None:  # the UI's preparation, on a loaded machine
        got.append((time.monotonic(), snapshot))
        time.sleep(0.15)

    hub.start(slow)
    try:
        deadline = time.monotonic() + 10.0
        while len(got) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        hub.stop()
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(got)]
    assert len(gaps) >= 3
    # 0.15 s of work, then at least as long at rest: not back to back every 0.15 s
    assert min(gaps) >= 0.28


@pytest.mark.usefixtures("paced")
def test_the_collector_waits_for_a_pause_in_the_typing() -> None:
    typing = [True]
    collect = gc_pace.collect_unless(lambda: typing[0])
    kept: list[list[int]] = [[] for _ in range(gc_pace.YOUNG_THRESHOLD + KEPT_MARGIN)]
    assert gc.get_count()[0] >= gc_pace.YOUNG_THRESHOLD
    assert collect() is None  # due, but a key came lately
    assert gc.get_count()[0] >= gc_pace.YOUNG_THRESHOLD
    typing[0] = False
    assert collect() == 0
    assert gc.get_count()[0] < gc_pace.YOUNG_THRESHOLD
    del kept
