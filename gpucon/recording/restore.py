"""History from a recording: the ticks a console restarted on its own recording starts with.

``recorded_ticks`` reads the newest ``count`` frames' history samples (the samples section the
recorder keeps each tick) and ends them with a gap tick (every series unknown) at the restart,
so a plot shows where the console was down and a rule that needs a value sustained over a
window (``model.history.sustained``) does not count the time across the restart.
The hub appends them through the history's public ``append`` (``Hub.restore_history``).
"""

from __future__ import annotations

from gpucon.model.history import Sample
from gpucon.recording.frames import FrameState
from gpucon.recording.store import RecordingStore

# a recording that ended longer ago than this is not restored: its plots say nothing of now
RESTORE_MAX_GAP_S = 3600.0


def recorded_ticks(
    store: RecordingStore, *, count: int, refresh_s: float, now: float
) -> list[tuple[float, dict[str, Sample]]]:
    """The last ``count`` recorded ticks (oldest first) and a gap tick; [] when the
    recording is empty or ended more than ``RESTORE_MAX_GAP_S`` before ``now``."""
    span = store.span()
    if span is None or now - span[1] > RESTORE_MAX_GAP_S:
        return []
    times = store.last_times(span[1], count)
    if not times:
        return []
    first = times[0]
    key_t = store.keyframe_at_or_before(first)
    if key_t is None:
        return []
    state = FrameState()
    ticks: list[tuple[float, dict[str, Sample]]] = []
    for t, kind, frame in store.frames(key_t, span[1]):
        state.apply(t, kind, frame)
        if t >= first and state.ready:
            ticks.append((t, state.samples()))
    if ticks:
        gap_t = min(now, ticks[-1][0] + refresh_s)
        if gap_t > ticks[-1][0]:
            ticks.append((gap_t, {}))
    return ticks[-(count + 1) :]
