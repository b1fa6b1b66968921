"""ForkedFirstRead: the first read comes from a child process, the rest from the source built
here; a child that fails or hangs leaves the first read to this process."""

from __future__ import annotations

import os
import threading
import time

import pytest

from gpucon.model.fleet import Health
from gpucon.model.reading import Reading
from gpucon.sources.base import Source
from gpucon.sources.forked_first_read import ForkedFirstRead


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the console when it forks: no other thread running (threads left by other
    tests of this process would stop the fork; the children here take no lock)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)


class PidSource:
    """Reads which process read it (in ``error``): the child's pid, or this one's."""

    name = "nvml"
    cadence_s = 7.0
    timeout_s = 3.0

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.closed = False

    def read(self) -> Reading:
        time.sleep(self.delay_s)
        return Reading("nvml", Health.OK, time.time(), error=f"read by {os.getpid()}")

    def close(self) -> None:
        self.closed = True


class Maker:
    """``make``: notes each source it builds (in the process that built it); a source built
    in a child process waits ``child_delay_s`` before it answers."""

    def __init__(self, built: list[PidSource], child_delay_s: float = 0.0) -> None:
        self.built = built
        self.child_delay_s = child_delay_s
        self.parent = os.getpid()

    def __call__(self) -> Source:
        source = PidSource(self.child_delay_s if os.getpid() != self.parent else 0.0)
        self.built.append(source)
        return source


def test_the_first_read_comes_from_a_child_the_next_from_the_source_built_here(alone: None) -> None:
    built: list[PidSource] = []
    source = ForkedFirstRead("nvml", Maker(built), cadence_s=1.0, timeout_s=5.0)
    assert source.forked
    first = source.read()
    assert first.health is Health.OK
    assert first.error is not None and first.error != f"read by {os.getpid()}"
    assert built == []  # built in the child only: nothing of it here yet
    assert (source.cadence_s, source.timeout_s) == (1.0, 5.0)
    second = source.read()
    assert second.error == f"read by {os.getpid()}"
    assert len(built) == 1
    # from then on the real source's cadence and timeout (an UnavailableSource's are longer)
    assert (source.cadence_s, source.timeout_s) == (7.0, 3.0)
    source.close()
    assert built[0].closed


def test_a_child_that_sends_nothing_leaves_the_first_read_to_this_process(alone: None) -> None:
    built: list[PidSource] = []

    def make() -> Source:
        if os.getpid() != parent:
            raise SystemExit(3)  # the child dies before it reads
        return Maker(built)()

    parent = os.getpid()
    source = ForkedFirstRead("nvml", make, cadence_s=1.0, timeout_s=5.0)
    assert source.read().error == f"read by {parent}"
    assert len(built) == 1


def test_a_child_slower_than_the_timeout_is_killed_and_the_read_made_here(alone: None) -> None:
    built: list[PidSource] = []
    source = ForkedFirstRead("nvml", Maker(built, child_delay_s=30.0), cadence_s=1.0, timeout_s=0.3)
    started = time.monotonic()
    reading = source.read()
    assert time.monotonic() - started < 5.0
    assert reading.error == f"read by {os.getpid()}"
    source.close()


def test_no_child_is_forked_while_other_threads_run() -> None:
    built: list[PidSource] = []
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        source = ForkedFirstRead("nvml", Maker(built), cadence_s=1.0, timeout_s=5.0)
    finally:
        stop.set()
        other.join()
    assert not source.forked
    assert source.read().error == f"read by {os.getpid()}"


def test_closing_before_the_first_read_stops_the_child(alone: None) -> None:
    source = ForkedFirstRead("nvml", Maker([], child_delay_s=30.0), cadence_s=1.0, timeout_s=5.0)
    child = source._child
    assert child is not None
    source.close()
    deadline = time.monotonic() + 5.0
    while not child.reap() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.reap()  # killed and collected: no process left behind
