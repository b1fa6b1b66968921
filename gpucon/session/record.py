"""Recording a session: the recorder on the session's hub, its history restored from the file.

``start_recording(session, path)`` opens (or creates) the recording, refuses a file that
records another fleet, fills the hub's history from the file's newest ticks when it is this
fleet's (a console restarted on its own recording starts with its plots filled), and
subscribes the recorder to the hub. The caller closes the recorder after the hub stops.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpucon.model.history import DEFAULT_CAPACITY
from gpucon.recording.recorder import Recorder
from gpucon.recording.restore import recorded_ticks

if TYPE_CHECKING:
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
    )
    if restore:
        ticks = recorded_ticks(
            recorder.store, count=DEFAULT_CAPACITY, refresh_s=hub.refresh_s, now=time.time()
        )
        if ticks:
            hub.restore_history(ticks)
    hub.subscribe(recorder)
    return recorder
