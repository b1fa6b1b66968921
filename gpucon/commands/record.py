"""``gpucon record FILE``: record the fleet all night with no terminal.

Runs the session's hub (the configured fleet, or ``--demo``) and its recorder and nothing
else; SIGTERM or SIGINT stops it cleanly (the queued snapshots are written, the alerts still
on are closed, the log is checkpointed into the file). The session is read-only: recording
never needs a write. Exit status 0 on a clean stop, 1 when the recorder failed or the file
cannot be written at start (a missing directory, no permission, a full disk: said with the
file and the OS error), 2 on a usage or config error (a file that is not this fleet's
recording included).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from types import FrameType


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument("file", metavar="FILE", help="the recording (created, or continued)")
    parser.add_argument(
        "--refresh",
        type=float,
        metavar="S",
        default=None,
        help="seconds between snapshots (default: config [ui] refresh_s, or 1)",
    )
    parser.add_argument("--demo", action="store_true", help="record the simulated fleet")
    parser.add_argument("--seed", type=int, default=7, help="simulator seed (default 7)")
    parser.add_argument("--scenario", metavar="NAME", default=None, help="simulated incident")
    parser.add_argument("--size", type=int, metavar="N", default=None, help="simulate N GPUs")
    parser.add_argument(
        "--duration",
        type=float,
        metavar="S",
        default=None,
        help="stop after S seconds (default: until SIGTERM or SIGINT)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gpucon.commands.snapshot import load_snapshot_config
    from gpucon.config import ConfigError
    from gpucon.config.checks import MAX_DURATION_S, MIN_REFRESH_S
    from gpucon.errors import BadParams, Refused, finite_number
    from gpucon.recording.store import RecordingError, RecordingUnwritable
    from gpucon.session import DemoOptions, open_session
    from gpucon.session.record import start_recording

    try:
        config = load_snapshot_config(args)
        refresh = config.ui.refresh_s if args.refresh is None else args.refresh
        refresh = finite_number(
            "--refresh (seconds)", refresh, minimum=MIN_REFRESH_S, maximum=MAX_DURATION_S
        )
        if args.duration is not None:
            finite_number("--duration (seconds)", args.duration, minimum=0.0, maximum=1e9)
    except (ConfigError, BadParams) as exc:
        print(f"gpucon record: {exc}", file=sys.stderr)
        return 2
    demo = DemoOptions(args.seed, args.scenario, args.size) if args.demo else None
    try:
        session = open_session(config, demo=demo, read_only=True, refresh_s=refresh)
    except (ValueError, Refused) as exc:
        print(f"gpucon record: {exc}", file=sys.stderr)
        return 2
    path = Path(args.file)
    try:
        recorder = start_recording(session, path, demo=demo)
    except (RecordingError, OSError) as exc:
        # recording is all this command does: a file it cannot write ends it at once
        session.close()
        if isinstance(exc, OSError):
            exc = RecordingUnwritable(path, exc)
        print(f"gpucon record: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, RecordingUnwritable) else 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    print(
        f"gpucon record: recording {recorder.fleet} to {path} every {refresh:g} s; "
        "SIGTERM or Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    try:
        session.hub.start(lambda snapshot: None)
        deadline = None if args.duration is None else time.monotonic() + args.duration
        # short waits: the signal handler runs between them at once
        while not stop.wait(0.2):
            if deadline is not None and time.monotonic() >= deadline:
                break
    finally:
        session.close()
        recorder.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    print(
        f"gpucon record: stopped; {recorder.frames_written} frames written to {path}"
        + (f", {recorder.dropped} dropped (the disk fell behind)" if recorder.dropped else ""),
        file=sys.stderr,
    )
    if recorder.error:
        print(f"gpucon record: {recorder.error}", file=sys.stderr)
        return 1
    return 0
