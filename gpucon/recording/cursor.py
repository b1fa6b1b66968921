"""A position in a recording: the snapshot there, with the history the console had then.

``ReplayCursor.seek(t)`` goes to the last frame at or before ``t``: it applies the keyframe
before it and every delta from there; ``fill_history`` then appends the recorded history
samples of the 120 ticks up to it to a fresh ``History`` (its public ``append``), so plots
show what the live console showed. ``advance(t)`` moves forward frame by frame from where it
is (playing). Snapshots are decoded only where asked for, never for every frame passed.
Single-threaded: the replay feed's thread owns it.
"""

from __future__ import annotations

from gpucon.model.history import DEFAULT_CAPACITY, History
from gpucon.model.snapshot import Snapshot
from gpucon.recording.collector import collector_paused
from gpucon.recording.frames import FrameState
from gpucon.recording.store import RecordingStore


class ReplayCursor:
    """Reads a recording forward from any point, keeping the history as it was."""

    def __init__(self, store: RecordingStore, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self.store = store
        self.capacity = capacity
        self.state = FrameState()
        # the history samples' own state: None until ``fill_history`` (a quick seek reads
        # the fleet only)
        self.samples_state: FrameState | None = None
        self.history = History(capacity=capacity)
        # the time of the frame applied last (None: nothing yet)
        self.t: float | None = None

    def span(self) -> tuple[float, float] | None:
        return self.store.span()

    def snapshot(self) -> Snapshot | None:
        return self.state.snapshot(self.history) if self.state.ready else None

    def seek(self, target: float) -> Snapshot | None:
        """The snapshot of the last frame at or before ``target`` (the first frame when
        ``target`` is before the recording); None for an empty file.

        Quick: it reads the fleet from the keyframe before ``target`` and the deltas after
        it, and its history is empty; ``fill_history`` then gives the history of the 120
        ticks up to it (at 512 GPUs, ~22,000 series x 120 ticks take seconds to append, the
        snapshot a fraction of one)."""
        with collector_paused():
            return self._seek(target)

    def _seek(self, target: float) -> Snapshot | None:
        span = self.store.span()
        if span is None:
            return None
        target = min(max(target, span[0]), span[1])
        key_t = self.store.keyframe_at_or_before(target)
        if key_t is None:
            return None
        self.state = FrameState()
        self.samples_state = None
        self.history = History(capacity=self.capacity)
        self.t = None
        for t, kind, fleet, _ in self.store.frame_parts(key_t, target, samples=False):
            if fleet is not None:
                self.state.apply(t, kind, fleet)
                if self.state.ready:
                    self.t = t
        return self.snapshot()

    def fill_history(self) -> Snapshot | None:
        """The current snapshot again, with the history of the ``capacity`` ticks up to it
        (as the live console had it), read from the samples of the frames before."""
        with collector_paused():
            return self._fill_history()

    def _fill_history(self) -> Snapshot | None:
        if self.t is None:
            return None
        window = self.store.last_times(self.t, self.capacity)
        first = window[0] if window else self.t
        key_t = self.store.keyframe_at_or_before(first)
        if key_t is None:
            return None
        state = FrameState()
        history = History(capacity=self.capacity)
        for t, kind, _, samples in self.store.frame_parts(key_t, self.t, fleet=False):
            state.apply(t, kind, samples or {})
            if state.ready and t >= first:
                history = state.append_samples(history)
        self.samples_state = state
        self.history = history
        return self.snapshot()

    def advance(self, target: float) -> Snapshot | None:
        """Apply every frame after the current one up to ``target`` (with its samples, once
        the history is filled); the snapshot there, or None when no frame was due."""
        if self.t is None:
            return self.seek(target)
        after = self.t
        samples_state = self.samples_state
        applied = False
        parts = self.store.frame_parts(after, target, samples=samples_state is not None)
        for t, kind, fleet, samples in parts:
            if t <= after or fleet is None:
                continue
            self.state.apply(t, kind, fleet)
            if samples_state is not None:
                samples_state.apply(t, kind, samples or {})
                if samples_state.ready:
                    self.history = samples_state.append_samples(self.history)
            self.t = t
            applied = True
        return self.snapshot() if applied else None

    def next_time(self, after: float) -> float | None:
        return self.store.next_time(after)

    def previous_time(self, before: float) -> float | None:
        return self.store.previous_time(before)
