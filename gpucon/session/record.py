"""Recording a session: the recorder on the session's hub, its history restored from the file.

``start_recording(session, path)`` opens (or creates) the recording, refuses a file that
records another fleet, fills the hub's history from the file's newest ticks when it is this
fleet's (a console restarted on its own recording starts with its plots filled), and
subscribes the recorder to the hub. The caller closes the recorder after the hub stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpucon.config import KEYFRAME_S
from gpucon.model.history import DEFAULT_CAPACITY
from gpucon.recording.recorder import Recorder
from gpucon.recording.restore import recorded_ticks
from gpucon.recording.status import RecordingStatus
from gpucon.recording.store import RecordingError

if TYPE_CHECKING:
    from gpucon.model.snapshot import Snapshot
    from gpucon.session import DemoOptions, Session


def fleet_label(session: Session, demo: DemoOptions | None) -> str:
    """The fleet a recording is of: the configured fleet's name, or the simulated fleet with
    what shapes it (two demos of different sizes are not the same fleet)."""
    if demo is None or not session.demo:
        return session.fleet_name
    size = "default" if demo.size is None else str(demo.size)
    return f"{session.fleet_name} seed={demo.seed} size={size}"


def start_recording(
    session: Session, path: Path, *, demo: DemoOptions | None = None, restore: bool = True
) -> Recorder:
    """Record ``session``'s hub to ``path`` (RecordingError: not a recording, another
    fleet's, or unwritable)."""
    limits = session.config.record
    hub = session.hub
    recorder = Recorder(
        path,
        fleet=fleet_label(session, demo),
        refresh_s=hub.refresh_s,
        keyframe_s=limits.keyframe_s,
        max_bytes=int(limits.max_mib * 1024 * 1024),
        max_age_s=limits.max_age_h * 3600.0,
        audit_path=session.audit_path,
        moves=hub.moves,
    )
    if restore:
        ticks = recorded_ticks(
            recorder.store, count=DEFAULT_CAPACITY, refresh_s=hub.refresh_s, now=time.time()
        )
        if ticks:
            hub.restore_history(ticks)
    hub.subscribe(recorder)
    return recorder


class NotRecording:
    """A ``--record`` file that could not be opened for writing: the console runs without
    it, and its REC badge says ``REC FAILED`` with the reason."""

    frames_written = 0
    dropped = 0

    def __init__(self, path: Path, problem: RecordingError) -> None:
        self.path = path
        self.error: str | None = str(problem)
        self.reason = problem.reason

    def status(self) -> RecordingStatus:
        return RecordingStatus(
            self.path.name, 0, 0, 0, self.error, reason=self.reason, started=False
        )

    def close(self, timeout_s: float = 5.0) -> None:
        """Nothing was opened."""


class FrozenClock:
    """A clock that moves only when told (recording the simulator faster than real time)."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def record_simulated(
    path: Path,
    *,
    seconds: float,
    demo: DemoOptions,
    start: float = 1_790_000_000.0,
    refresh_s: float = 1.0,
    keyframe_s: float = KEYFRAME_S,
    max_bytes: int = 1 << 40,
    on_snapshot: Callable[[Snapshot], None] | None = None,
) -> Recorder:
    """Record ``seconds`` of the simulated fleet as fast as it computes, one tick per
    ``refresh_s`` of simulated time from ``start`` (the example recording, benchmarks,
    tests); ``on_snapshot`` sees each live snapshot as the console would. Returns the
    closed recorder (its counts)."""
    from gpucon.hub import Hub
    from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
    from gpucon.sim.source import SimSource

    clock = FrozenClock(start)
    source = SimSource.for_demo(demo.seed, demo.scenario, demo.size, clock=clock)
    hub = Hub(
        [source],
        refresh_s=refresh_s,
        clock=clock,
        slo_p95_ms_by_model=DEMO_SLO_P95_MS,
        rate_window=DEMO_RATE_WINDOW,
    )
    size = "default" if demo.size is None else str(demo.size)
    recorder = Recorder(
        path,
        fleet=f"simulated seed={demo.seed} size={size}",
        refresh_s=refresh_s,
        keyframe_s=keyframe_s,
        max_bytes=max_bytes,
        block=True,
        moves=hub.moves,
    )
    hub.subscribe(recorder)
    try:
        for _ in range(round(seconds / refresh_s)):
            hub.poll_once()
            snapshot = hub.tick()
            if on_snapshot is not None:
                on_snapshot(snapshot)
            clock.now += refresh_s
    finally:
        recorder.close(timeout_s=600.0)
    return recorder
