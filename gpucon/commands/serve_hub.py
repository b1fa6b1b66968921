"""The one reader of the fleet behind a browser wall: ``gpucon serve``'s shared hub.

Each browser gets its own console process (textual-serve), and each used to open its own
session: N viewers were N readers of Redis, Prometheus, NVML and every backend's health
endpoint. Now the server opens one read-only session, runs its hub, and records what it reads
to a private file in a temporary directory (``gpucon.recording``: keyframes and deltas, a
rolling window of ``KEEP_S``); every viewer follows that file (``recording/follow.py``). The
file is the server's alone: removed when it stops.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from types import TracebackType

# what the shared file keeps: enough for the wall's plots (the history's window), no more
KEEP_S = 900.0
# a viewer that opens seeks to the newest keyframe and plays forward from it
KEYFRAME_S = 10.0


class SharedWall:
    """The session, hub and recorder every viewer of a ``gpucon serve`` follows."""

    def __init__(self, args: argparse.Namespace) -> None:
        from gpucon.commands.console import _load_config
        from gpucon.recording.recorder import Recorder
        from gpucon.session import DemoOptions, open_session
        from gpucon.session.record import fleet_label

        as_console = argparse.Namespace(**vars(args))
        as_console.command = "demo" if args.demo else "live"
        config = _load_config(as_console)
        demo = DemoOptions(7, None, None) if args.demo else None
        refresh_s = args.refresh if args.refresh is not None else config.ui.refresh_s
        self.session = open_session(config, demo=demo, read_only=True, refresh_s=refresh_s)
        self._dir = tempfile.TemporaryDirectory(prefix="gpucon-wall-")
        self.path = Path(self._dir.name) / "wall.sqlite"
        hub = self.session.hub
        self.recorder = Recorder(
            self.path,
            fleet=fleet_label(self.session, demo),
            refresh_s=hub.refresh_s,
            keyframe_s=KEYFRAME_S,
            max_age_s=KEEP_S,
            moves=hub.moves,
        )
        hub.subscribe(self.recorder)

    def start(self) -> SharedWall:
        self.session.hub.start(lambda _snapshot: None)  # the recorder is its subscriber
        return self

    def close(self) -> None:
        self.session.hub.stop()
        self.recorder.close()
        self.session.close()
        self._dir.cleanup()

    def __enter__(self) -> SharedWall:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
