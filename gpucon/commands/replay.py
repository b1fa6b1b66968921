"""``gpucon replay FILE``: a recording in the console, read-only, with a timeline.

The same fleet table, detail plots, alerts and audit records (those written while it was
recorded), fed by ``gpucon.recording.replay.ReplayFeed`` instead of a hub; no action key
exists (a read-only console). Keys: space play/pause, ``,`` ``.`` step, ``[`` ``]`` ∓10 s,
``{`` ``}`` ∓1 min, ``N`` ``n`` previous/next alert's start, ``x`` speed ×1/×10/×60.

``--alerts-only`` prints instead when each alert would have fired with the thresholds of the
config in use (``gpucon.recording.rerun``), beside what the recording holds.
Exit status 2 when the file is not a recording or a time cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucon.config import GpuconConfig
    from gpucon.recording.store import AlertSpan, RecordingStore


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument("file", metavar="FILE", help="a recording (gpucon record, --record)")
    parser.add_argument(
        "--at",
        metavar="TIME",
        default=None,
        help="start there: epoch seconds, +SECONDS from the start, HH:MM[:SS] or a date-time",
    )
    parser.add_argument("--paused", action="store_true", help="start paused")
    parser.add_argument(
        "--speed",
        type=int,
        choices=(1, 10, 60),
        default=1,
        help="start playing at ×1, ×10 or ×60 (x cycles them)",
    )
    parser.add_argument(
        "--alerts-only",
        action="store_true",
        help="print when each alert would have fired with the current thresholds",
    )
    parser.add_argument("--json", action="store_true", help="--alerts-only as JSON")
    parser.add_argument(
        "--page-seconds",
        type=float,
        metavar="S",
        default=10.0,
        help="--noc: seconds each page stays up (default 10)",
    )


def load_any_config(args: argparse.Namespace) -> GpuconConfig:
    """The config in use, or the defaults (with GPUCON_* variables) when there is none: a
    replay reads no fleet."""
    import os
    from pathlib import Path

    from gpucon.config import ConfigMissing, GpuconConfig, load_config
    from gpucon.config.env import apply_env

    try:
        return load_config(Path(args.config) if args.config else None, fleet=args.fleet)
    except ConfigMissing:
        return apply_env(GpuconConfig(), os.environ)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gpucon.config import ConfigError
    from gpucon.recording.store import RecordingError, RecordingStore
    from gpucon.recording.times import TimeError, parse_time

    if args.json and not args.alerts_only:  # the console has no JSON: never start it for one
        print(
            "gpucon replay: --json needs --alerts-only (the console prints no JSON)",
            file=sys.stderr,
        )
        return 2
    try:
        config = load_any_config(args)
    except ConfigError as exc:
        print(f"gpucon replay: {exc}", file=sys.stderr)
        return 2
    try:
        store = RecordingStore(Path(args.file), readonly=True)
    except RecordingError as exc:
        print(f"gpucon replay: {exc}", file=sys.stderr)
        return 2
    try:
        if args.alerts_only:
            return _alerts_only(store, config, as_json=args.json)
        span = store.span()
        start_at = None
        if args.at is not None and span is not None:
            try:
                start_at = parse_time(args.at, span)
            except TimeError as exc:
                print(f"gpucon replay: --at: {exc}", file=sys.stderr)
                return 2
        return _console(args, store, config, start_at)
    finally:
        store.close()


def _console(
    args: argparse.Namespace, store: RecordingStore, config: GpuconConfig, start_at: float | None
) -> int:
    import tempfile
    from pathlib import Path

    from gpucon.app import GpuconApp
    from gpucon.commands.hangup import HANGUP_EXIT, TerminalWatch
    from gpucon.recording.replay import ReplayFeed

    feed = ReplayFeed(store, start_at=start_at, paused=args.paused, speed=float(args.speed))
    with tempfile.TemporaryDirectory(prefix="gpucon-replay-") as tmp:
        # the audit screen reads a file: the recording's records, copied out
        audit_file = Path(tmp) / "audit.jsonl"
        audit_file.write_text("".join(line + "\n" for line in store.audit_lines()))
        app = GpuconApp(
            feed,
            mode="replay",
            read_only=True,
            noc=bool(args.noc),
            theme=args.theme or (None if args.noc else config.ui.theme),
            keys=config.ui.keys,
            fleet_name=feed.fleet,
            default_slo_ms=config.alerts.default_slo_p95_ms,
            page_s=args.page_seconds,
            replay=feed,
            audit_file=audit_file,
        )
        if feed.latest is None:
            app.startup_problems.append(f"{args.file}: the recording holds no frame yet")

        def quit() -> None:
            app.call_from_thread(app.exit, None, HANGUP_EXIT)

        watch = TerminalWatch(lambda why: None, quit).start()
        try:
            app.run()
        finally:
            watch.close()
            feed.stop()
    return app.return_code or 0


def _alerts_only(store: RecordingStore, config: GpuconConfig, *, as_json: bool) -> int:
    import json

    from gpucon.recording.rerun import rerun_alerts
    from gpucon.redact import redact

    result = rerun_alerts(store, config.alerts, config.slo_p95_ms)
    recorded = {(s.key, round(s.start, 3)) for s in result.recorded}
    fired = {(s.key, round(s.start, 3)) for s in result.fired}
    if as_json:
        doc = {
            "frames": result.frames,
            "fired": [_span_doc(s, (s.key, round(s.start, 3)) in recorded) for s in result.fired],
            "no_longer_fire": [
                _span_doc(s, True)
                for s in result.recorded
                if (s.key, round(s.start, 3)) not in fired
            ],
        }
        print(redact(json.dumps(doc, indent=1)))
        return 0
    span = store.span()
    print(
        f"{len(result.fired)} alerts over {result.frames} frames with the current thresholds"
        + ("" if span is None else f" ({_local(span[0])} to {_local(span[1])})")
    )
    for s in result.fired:
        same = "as recorded" if (s.key, round(s.start, 3)) in recorded else "NEW"
        print(redact(_span_line(s, same)))
    gone = [s for s in result.recorded if (s.key, round(s.start, 3)) not in fired]
    if gone:
        print(f"{len(gone)} recorded alerts would not fire with these thresholds:")
        for s in gone:
            print(redact(_span_line(s, "recorded")))
    return 0


_SEVERITY = {0: "INFO", 1: "WARN", 2: "CRIT"}


def _local(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t * 10) % 10}"


def _span_line(s: AlertSpan, note: str) -> str:
    end = "still on at the end" if s.end is None else f"until {_local(s.end)[11:]}"
    severity = _SEVERITY.get(s.severity, str(s.severity))
    return (
        f"{_local(s.start)}  {severity}  {_safe(s.target, 60)}  "
        f"{_safe(s.message, 120)}  ({end}; {note})"
    )


def _safe(text: str, limit: int) -> str:
    """Recorded fleet text with control characters escaped (never raw on a terminal), cut;
    quotes stay as they are (a repr would print ``\\'``)."""
    from gpucon.commands.terminal_text import safe_line

    escaped = safe_line(text)
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def _span_doc(s: AlertSpan, as_recorded: bool) -> dict[str, object]:
    return {
        "key": s.key,
        "rule": s.rule,
        "target": s.target,
        "severity": _SEVERITY.get(s.severity, str(s.severity)).lower(),
        "message": s.message,
        "start": s.start,
        "end": s.end,
        "since": s.since,
        "as_recorded": as_recorded,
    }
