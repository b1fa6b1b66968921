"""The hub: merging, stale data kept and marked, guarded reads, background thread, timeouts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from gpucon.hub import MIN_RETRY_S, Hub, backoff_s, next_read_at
from gpucon.model.fleet import Backend, Health, Slot, SlotKind
from gpucon.model.reading import Reading
from gpucon.model.snapshot import Snapshot


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class ScriptedSource:
    """A source that answers from a script of values or exceptions (a test double of a source)."""

    def __init__(self, name: str, clock: FakeClock, script: list[object]) -> None:
        self.name = name
        self.cadence_s = 1.0
        self.timeout_s = 1.0
        self.clock = clock
        self.script = script
        self.closed = False

    def read(self) -> Reading:
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        assert isinstance(item, float)
        slot = Slot(id="h/gpu0", kind=SlotKind.GPU, gpu_uuid="GPU-0", activity_pct=item)
        return Reading(self.name, Health.OK, self.clock(), slots=(slot,))

    def close(self) -> None:
        self.closed = True


def test_a_raising_source_becomes_down_and_its_last_data_stays_marked_stale() -> None:
    clock = FakeClock()
    src = ScriptedSource("nvml", clock, [50.0, RuntimeError("driver gone\nmore")])
    hub = Hub([src], clock=clock)
    hub.poll_once()
    snap = hub.tick()
    assert snap.slots["h/gpu0"].activity_pct == 50.0
    assert not snap.is_stale("slot:h/gpu0")
    clock.t += 1
    hub.poll_once()
    snap = hub.tick()
    status = snap.sources["nvml"]
    assert status.health is Health.DOWN
    assert status.error == "RuntimeError: driver gone"
    assert snap.slots["h/gpu0"].activity_pct == 50.0  # last good value kept ...
    assert snap.is_stale("slot:h/gpu0")  # ... and marked stale
    assert [a.rule for a in snap.alerts] == ["stale_source"]


def test_history_and_sequence_advance_per_tick() -> None:
    clock = FakeClock()
    hub = Hub([ScriptedSource("sim", clock, [10.0, 20.0, 30.0])], clock=clock)
    for _ in range(3):
        hub.poll_once()
        hub.tick()
        clock.t += 1
    snap = hub.latest
    assert snap is not None and snap.seq == 3
    assert snap.history.get("slot:h/gpu0:activity") == (10.0, 20.0, 30.0)


def test_a_failed_source_is_retried_once_per_cadence_never_faster() -> None:
    assert backoff_s(1.0, 0) == 1.0
    assert backoff_s(5.0, 1) == 5.0
    assert backoff_s(5.0, 20) == 5.0  # a long outage: still one attempt per cadence
    assert backoff_s(0.01, 3) == MIN_RETRY_S  # a tiny cadence does not hammer a dead server


class BlockingSource:
    name = "slow"
    cadence_s = 0.05
    timeout_s = 0.2

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def read(self) -> Reading:
        self.calls += 1
        self.release.wait(5.0)
        return Reading(self.name, Health.OK, time.time())

    def close(self) -> None:
        self.release.set()


def test_a_good_read_is_followed_a_cadence_after_it_started_not_after_it_ended() -> None:
    # a 0.5 s readiness read that took 30 ms: the next is due 0.5 s after the start
    assert next_read_at(0.5, 0, started=100.0, now=100.03) == 100.5
    # a read that took most of its cadence still leaves the source a quarter cadence of rest
    assert next_read_at(1.0, 0, started=100.0, now=100.9) == 101.15
    assert next_read_at(1.0, 0, started=100.0, now=103.0) == 103.25  # a read past its cadence
    # a failed read is retried on the backoff from its end; a read no one scheduled likewise
    assert next_read_at(5.0, 2, started=100.0, now=101.0) == 106.0
    assert next_read_at(1.0, 0, started=None, now=50.0) == 51.0


class SteadySource:
    """A source whose every read takes ``read_s`` of wall time (a real sleep)."""

    def __init__(self, cadence_s: float, read_s: float) -> None:
        self.name = "steady"
        self.cadence_s = cadence_s
        self.timeout_s = 5.0
        self.read_s = read_s
        self.starts: list[float] = []

    def read(self) -> Reading:
        self.starts.append(time.monotonic())
        time.sleep(self.read_s)
        return Reading(self.name, Health.OK, time.time())

    def close(self) -> None:
        pass


def test_a_source_whose_reads_take_a_fifth_of_its_cadence_keeps_its_cadence() -> None:
    source = SteadySource(cadence_s=0.25, read_s=0.05)
    hub = Hub([source], refresh_s=0.05)
    hub.start(lambda _snapshot: None)
    try:
        deadline = time.monotonic() + 10.0
        while len(source.starts) < 9 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        hub.stop()
    gaps = [b - a for a, b in zip(source.starts[1:], source.starts[2:], strict=False)]
    assert len(gaps) >= 7
    # counted from each read's end the gaps would be 0.30 s; the hub's loop may start a read
    # up to one refresh (0.05 s) late on a loaded machine, so the median sits below 0.30
    gaps.sort()
    assert gaps[len(gaps) // 2] < 0.29, gaps


def test_background_hub_keeps_ticking_while_a_source_hangs() -> None:
    slow = BlockingSource()
    hub = Hub([slow], refresh_s=0.05)
    got: list[Snapshot] = []
    hub.start(got.append)
    try:
        deadline = time.time() + 3.0
        while time.time() < deadline:
            if got and got[-1].sources["slow"].health is Health.DEGRADED:
                break
            time.sleep(0.02)
    finally:
        hub.stop()
    assert got, "no snapshot was emitted while the source hung"
    last = got[-1].sources["slow"]
    assert last.health is Health.DEGRADED and "timed out" in (last.error or "")
    assert slow.calls == 1  # a hanging read is never piled on


def test_a_source_not_read_yet_is_not_stale_until_its_time() -> None:
    clock = FakeClock()
    hub = Hub([ScriptedSource("nvml", clock, [1.0])], clock=clock)
    snap = hub.tick()
    assert snap.sources["nvml"].last_ok_at is None
    assert not [a for a in snap.alerts if a.rule == "stale_source"]
    clock.t += hub.thresholds.stale_after_s + 1
    snap = hub.tick()
    assert [a.target for a in snap.alerts if a.rule == "stale_source"] == ["nvml"]


def test_the_first_background_snapshot_already_holds_the_first_readings() -> None:
    src = ScriptedSource("sim", FakeClock(), [42.0])
    src.clock = time.time  # type: ignore[assignment]
    hub = Hub([src], refresh_s=0.05)
    first = threading.Event()
    got: list[Snapshot] = []

    def take(snapshot: Snapshot) -> None:
        got.append(snapshot)
        first.set()

    hub.start(take)
    try:
        assert first.wait(3.0)
    finally:
        hub.stop()
    assert got[0].slots["h/gpu0"].activity_pct == 42.0
    assert src.closed


class HangingCloseSource(ScriptedSource):
    def close(self) -> None:
        time.sleep(30)


def test_stop_does_not_wait_for_a_source_whose_close_hangs() -> None:
    clock = FakeClock()
    hub = Hub([HangingCloseSource("stuck", clock, [1.0])], refresh_s=0.05)
    hub.start(lambda snapshot: None)
    started = time.monotonic()
    hub.stop()  # the console calls this on the UI thread when it quits
    assert time.monotonic() - started < 3.0


class GatedSource:
    """A source whose read waits until the test opens its gate; counts its reads."""

    name = "nvml"
    cadence_s = 60.0  # one read in this test's lifetime unless something reads twice
    timeout_s = 5.0

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.reads = 0

    def read(self) -> Reading:
        self.gate.wait(5.0)
        self.reads += 1
        slot = Slot(id="h/gpu0", kind=SlotKind.GPU, gpu_uuid="GPU-0", activity_pct=42.0)
        return Reading(self.name, Health.OK, time.time(), slots=(slot,))

    def close(self) -> None:
        self.gate.set()


def _until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_first_reads_start_before_the_hub_does_and_the_first_snapshot_waits_for_none() -> None:
    src = GatedSource()
    hub = Hub([src], refresh_s=0.05)
    began = time.monotonic()
    hub.start_reading()
    try:
        # the read is in flight in a worker: no snapshot yet, and asking does not wait for one
        started = time.monotonic()
        assert hub.tick_if_read() is None
        assert time.monotonic() - started < 0.5
        # a bounded wait: still nothing, and no longer than asked
        assert hub.tick_if_read(within_s=0.3) is None
        assert 0.29 <= time.monotonic() - began < 3.0  # counted from start_reading
        # answered within the wait: the snapshot comes as soon as the read does
        threading.Timer(0.05, src.gate.set).start()
        assert hub.tick_if_read(within_s=10.0) is not None
        first = hub.latest
        assert first is not None and first.slots["h/gpu0"].activity_pct == 42.0
        got: list[Snapshot] = []
        hub.start(got.append)
        _until(lambda: len(got) >= 2)
        # start() carried on from the reads already made: the source was read once, not twice
        assert src.reads == 1
        assert got[0].seq > first.seq
    finally:
        hub.stop()


class NamingSource:
    """A registry-like source naming one backend and its url."""

    name = "redis"
    cadence_s = 60.0
    timeout_s = 5.0

    def read(self) -> Reading:
        backend = Backend(name="b0", url="http://127.0.0.1:1")
        return Reading(self.name, Health.OK, time.time(), backends=(backend,))

    def close(self) -> None:
        pass


class CheckingSource:
    """A readiness-like source: checks the backends the hub tells it of."""

    name = "readiness"
    cadence_s = 60.0
    timeout_s = 5.0

    def __init__(self) -> None:
        self.told: list[dict[str, str]] = []

    def observe_backends(self, urls: Mapping[str, str]) -> None:
        self.told.append(dict(urls))

    def read(self) -> Reading:
        return Reading(self.name, Health.OK, time.time())

    def close(self) -> None:
        pass


def test_a_backend_checker_reads_before_the_first_snapshot_once_the_backends_are_named() -> None:
    checker = CheckingSource()
    hub = Hub([checker, NamingSource()], refresh_s=60.0)
    began = time.monotonic()
    hub.start_reading()
    try:
        snapshot = hub.tick_if_read(within_s=5.0)
        # not the whole wait: the checker was sent out as soon as the registry had answered
        assert snapshot is not None and time.monotonic() - began < 2.5
        assert checker.told and checker.told[-1] == {"b0": "http://127.0.0.1:1"}
        assert snapshot.sources["readiness"].health is Health.OK
    finally:
        hub.stop()
