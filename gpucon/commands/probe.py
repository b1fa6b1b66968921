"""``gpucon probe TARGET``: a bounded load probe from the shell, planned, confirmed, audited.

The action itself is ``gpucon.actions.probe``; this module is its verb: the options (each one
not given is chosen from the backend's observed service time), the params they make, a
progress bar on stderr, and the same plan/confirm/apply path as the other verbs
(``gpucon.commands.actions.run_planned``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucon.actions.plan import ProgressEvent
    from gpucon.config import GpuconConfig


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument(
        "target", metavar="TARGET", help="a probe target named in the config (--demo: a backend)"
    )
    # each one left out is chosen from the backend's observed service time (the plan says how)
    parser.add_argument("--count", type=float, default=None, help="requests (cap: max_requests)")
    parser.add_argument("--rate", type=float, default=None, help="requests/s (max_rate_per_s)")
    parser.add_argument("--concurrency", type=float, default=None, help="at once (max_concurrency)")
    parser.add_argument("--duration", type=float, default=None, help="seconds (max_duration_s)")
    parser.add_argument("--timeout", type=float, default=None, help="per request, seconds")
    parser.add_argument("--via-queue", action="store_true", help="through the Redis queue")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, send nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--json", action="store_true", help="print plan and outcome as JSON")
    parser.add_argument(
        "--demo", action="store_true", help="probe a backend of a simulated fleet (any backend)"
    )


def params_from_args(args: argparse.Namespace, config: GpuconConfig) -> dict[str, Any]:
    fleet = config.fleet
    demo = bool(getattr(args, "demo", False))
    params: dict[str, Any] = {
        "target": args.target,
        "probe_targets": () if demo else fleet.probe_targets,
        "via_queue": bool(args.via_queue),
        "simulated": demo,
    }
    for name in ("count", "rate", "concurrency", "duration", "timeout"):
        value = getattr(args, name)
        if value is not None:
            params[name] = value
    if fleet.redis is not None and not demo:
        params["redis_url"] = fleet.redis.url
        params["stream"] = fleet.redis.streams[0] if fleet.redis.streams else "gen:queue"
    return params


class _ProgressBar:
    """One updating line on a terminal (stderr), a line per step otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, event: ProgressEvent) -> None:
        from gpucon.actions.plan import StepStatus
        from gpucon.commands.terminal_text import safe_line as _safe

        if event.status is StepStatus.RUNNING:
            if not self.tty:
                return
            filled = int(20 * (event.fraction or 0.0))
            bar = "#" * filled + "." * (20 - filled)
            sys.stderr.write(f"\r  probe [{bar}] {_safe(event.text)}   ")
            sys.stderr.flush()
            return
        if self.tty and event.step == "probe" and event.status is not StepStatus.STARTED:
            sys.stderr.write("\n")
        print(_safe(f"  [{event.status}] {event.step}: {event.text}"), file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from gpucon.actions.probe import apply, plan
    from gpucon.commands.action_context import verb_session
    from gpucon.commands.actions import reported, run_planned

    def go() -> int:
        session = verb_session(args)
        try:
            params = params_from_args(args, session.config)
            return run_planned(args, session, plan, apply, params, _ProgressBar())
        finally:
            session.close()

    return reported(args, go)
