"""``gpucon snapshot [--json] [--demo]``: read every source once and print one snapshot.

The live fleet comes from the config (``--config``, ``--fleet``); ``--demo`` reads the
simulator instead (``--seed``, ``--scenario``, ``--size``). ``--json`` prints a stable shape:
``{"taken_at", "seq", "fleet", "rate_window", "gpus", "slots", "backends", "queues", "latency",
"nodes", "liveness", "sources", "alerts"}``, each a list sorted by its key. Every entity carries
``age_s``, ``stale`` and ``stale_fields`` (see ``snapshot_document``); a node also carries
``mig_pending_since`` (when this console first saw its MIG config pending); ``liveness`` says
per backend what each readiness signal said, when, and the verdict ``serving``; ``alerts`` are
in the console's order (causes first, model.alert_order), each with ``key``, ``rule``,
``target``, ``severity``, ``message``, ``since`` and ``cause``. Otherwise a
short text table (GPU health, nodes and readiness included). Exit status 1 when every source
is down (the readiness checks aside), 2 on a config error. Untrusted text (names, labels,
errors) is printed with control codes removed; JSON escapes them. The document and the
table are built in ``gpucon.commands.snapshot_render``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from gpucon.commands.snapshot_render import snapshot_document, snapshot_text

if TYPE_CHECKING:
    from gpucon.config import GpuconConfig
    from gpucon.session import Session


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON (a stable shape)")
    parser.add_argument("--demo", action="store_true", help="the simulated fleet, no setup")
    parser.add_argument("--seed", type=int, default=7, help="simulator seed (default 7)")
    parser.add_argument(
        "--scenario",
        metavar="NAME",
        default=None,
        help="simulated incident; the snapshot is taken 45 s in, 35 s after it starts",
    )
    parser.add_argument("--size", type=int, metavar="N", default=None, help="simulate N GPUs")
    parser.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        default=None,
        help="the fleet as a recording holds it (gpucon record, --record), at --at",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        default=None,
        help="with --from: epoch seconds, +SECONDS from the start, HH:MM[:SS] or a date-time "
        "(default: the recording's end)",
    )


def load_snapshot_config(args: argparse.Namespace) -> GpuconConfig:
    """The config; the demo needs none (its defaults, with GPUCON_* variables applied)."""
    import os
    from pathlib import Path

    from gpucon.config import ConfigMissing, GpuconConfig, load_config
    from gpucon.config.env import apply_env

    try:
        return load_config(Path(args.config) if args.config else None, fleet=args.fleet)
    except ConfigMissing:
        if not args.demo:
            raise
        return apply_env(GpuconConfig(), os.environ)


# a scenario's snapshot is taken this long into the simulation: its incident starts at 10 s,
# so the fault shows (a snapshot at t=0 would show a healthy fleet and not say why); past
# 40 s, when gpu-fault's XID comes (at 40 s itself the snapshot showed no XID and no alert)
SCENARIO_AT_S = 45.0


def _advance_to_incident(session: Session, scenario: str) -> None:
    """Run the simulated fleet ``SCENARIO_AT_S`` seconds, and say so on stderr."""
    from gpucon.sim.scenarios import INCIDENT_START_S

    for source in session.hub.sources:
        fleet = getattr(source, "fleet", None)
        if fleet is not None:
            fleet.step(SCENARIO_AT_S)
    print(
        f"gpucon snapshot: scenario {scenario}: the simulated fleet was run {SCENARIO_AT_S:.0f} s "
        f"(the incident starts at {INCIDENT_START_S:.0f} s) before this snapshot",
        file=sys.stderr,
    )


def _recorded(args: argparse.Namespace) -> int:
    """``--from FILE --at TIME``: the recorded snapshot at (or just before) TIME."""
    from pathlib import Path

    from gpucon.commands.replay import load_any_config
    from gpucon.config import ConfigError
    from gpucon.recording.cursor import ReplayCursor
    from gpucon.recording.store import RecordingError, RecordingStore
    from gpucon.recording.times import TimeError, parse_time
    from gpucon.redact import redact, redact_tree

    try:  # the default SLO a backend whose model has none is held to, as replay shows it
        config = load_any_config(args)
    except ConfigError as exc:
        print(f"gpucon: {exc}", file=sys.stderr)
        return 2
    try:
        store = RecordingStore(Path(args.from_file), readonly=True)
    except RecordingError as exc:
        print(f"gpucon snapshot: {exc}", file=sys.stderr)
        return 2
    try:
        span = store.span()
        if span is None:
            print(
                f"gpucon snapshot: {args.from_file}: the recording holds no frame", file=sys.stderr
            )
            return 2
        try:
            at = span[1] if args.at is None else parse_time(args.at, span)
        except TimeError as exc:
            print(f"gpucon snapshot: --at: {exc}", file=sys.stderr)
            return 2
        if not span[0] - 1.0 <= at <= span[1] + 1.0:
            print(
                f"gpucon snapshot: --at: {at:.1f} is outside the recording "
                f"({span[0]:.1f} to {span[1]:.1f})",
                file=sys.stderr,
            )
            return 2
        snapshot = ReplayCursor(store).seek(at)
        fleet = store.meta().get("fleet", "")
    finally:
        store.close()
    assert snapshot is not None
    if args.json:
        json.dump(redact_tree(snapshot_document(snapshot, fleet)), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        text = snapshot_text(snapshot, fleet, config.alerts.default_slo_p95_ms)
        print(redact("\n".join(text)))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.from_file is not None:
        return _recorded(args)
    if args.at is not None:
        print("gpucon snapshot: --at needs --from FILE", file=sys.stderr)
        return 2
    from gpucon.config import ConfigError
    from gpucon.errors import Refused
    from gpucon.redact import redact, redact_tree
    from gpucon.session import DemoOptions, open_session

    try:
        config = load_snapshot_config(args)
    except ConfigError as exc:
        print(f"gpucon: {exc}", file=sys.stderr)
        return 2
    demo = DemoOptions(args.seed, args.scenario, args.size) if args.demo else None
    try:
        session = open_session(config, demo=demo, read_only=True)
    except (ValueError, Refused) as exc:  # unknown scenario, a fleet that names no source
        print(f"gpucon snapshot: {exc}", file=sys.stderr)
        return 2
    fleet = "demo" if session.demo else session.fleet_name
    # the readiness checks only check what the other sources name: they do not count here
    checkers = {s.name for s in session.hub.sources if hasattr(s, "observe_backends")}
    try:
        if demo is not None and args.scenario:
            _advance_to_incident(session, args.scenario)
        session.hub.poll_once()
        snapshot = session.hub.tick()
    finally:
        session.close()
    if args.json:
        document = redact_tree(snapshot_document(snapshot, fleet))
        json.dump(document, sys.stdout, indent=1, sort_keys=False)
        sys.stdout.write("\n")
    else:
        text = snapshot_text(snapshot, fleet, config.alerts.default_slo_p95_ms)
        print(redact("\n".join(text)))
    from gpucon.model.fleet import Health

    statuses = [s for name, s in snapshot.sources.items() if name not in checkers]
    return 1 if statuses and all(s.health is Health.DOWN for s in statuses) else 0
