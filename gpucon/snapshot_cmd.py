"""``gpucon snapshot [--json] [--demo]``: read every source once and print one snapshot.

The live fleet comes from the config (``--config``, ``--fleet``); ``--demo`` reads the
simulator instead (``--seed``, ``--scenario``, ``--size``). ``--json`` prints a stable shape:
``{"taken_at", "seq", "fleet", "gpus", "slots", "backends", "queues", "latency", "liveness",
"sources", "alerts"}``, each a list sorted by its key (``liveness``: per backend, what each
readiness signal said, when, and the verdict ``serving``); otherwise a short text table.
Exit status 1 when every source is down (the readiness checks aside), 2 on a config error.
Untrusted text (names, labels, errors) is printed with control codes removed; JSON escapes
them.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucon.model.snapshot import Snapshot


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON (a stable shape)")
    parser.add_argument("--demo", action="store_true", help="the simulated fleet, no setup")
    parser.add_argument("--seed", type=int, default=7, help="simulator seed (default 7)")
    parser.add_argument("--scenario", metavar="NAME", default=None, help="simulated incident")
    parser.add_argument("--size", type=int, metavar="N", default=None, help="simulate N GPUs")


def jsonable(value: Any) -> Any:
    """Dataclasses, enums, tuples and mappings as plain JSON values."""
    if isinstance(value, enum.IntEnum):
        return value.name.lower()
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def snapshot_document(snapshot: Snapshot, fleet: str) -> dict[str, Any]:
    """The JSON shape of ``gpucon snapshot --json``."""

    def items(mapping: Any) -> list[Any]:
        return [jsonable(mapping[k]) for k in sorted(mapping)]

    return {
        "taken_at": snapshot.taken_at,
        "seq": snapshot.seq,
        "fleet": fleet,
        "gpus": items(snapshot.gpus),
        "slots": items(snapshot.slots),
        "backends": items(snapshot.backends),
        "queues": items(snapshot.queues),
        "latency": items(snapshot.latency),
        "liveness": [liveness_item(snapshot, name) for name in sorted(snapshot.liveness)],
        "sources": items(snapshot.sources),
        "alerts": [jsonable(a) for a in snapshot.alerts],
    }


def liveness_item(snapshot: Snapshot, name: str) -> dict[str, Any]:
    """One backend's liveness, with the time each signal was read (its source's last good
    read; the registry's is its ``ready_at``)."""
    lv = snapshot.liveness[name]
    item: dict[str, Any] = jsonable(lv)

    def read_at(source: str | None) -> float | None:
        status = snapshot.sources.get(source) if source else None
        return None if status is None else status.last_ok_at

    item["http_checked_at"] = read_at(lv.http_source)
    item["prom_checked_at"] = read_at(lv.prom_source)
    return item


def _ready_word(snapshot: Snapshot, name: str) -> str:
    lv = snapshot.liveness.get(name)
    if lv is None:
        return "n/a"
    return {True: "yes", False: "NO", None: "?"}[lv.serving]


def _num(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def snapshot_text(snapshot: Snapshot, fleet: str) -> list[str]:
    """A short text view: sources, slots with their backends, backends (with or without a
    known slot), queues, alerts."""
    from gpucon.widgets.safe_text import clean

    lines = [f"fleet {clean(fleet)} · {len(snapshot.slots)} slots · seq {snapshot.seq}"]
    for name in sorted(snapshot.sources):
        s = snapshot.sources[name]
        error = f"  {clean(s.error)}" if s.error else ""
        lines.append(f"  source {name:<11} {s.health.value:<9}{error}")
    lines.append("")
    lines.append(f"{'SLOT':<28} {'PROFILE':<14} {'ACTIVITY':>8} {'MEM MiB':>15}  BACKENDS")
    for sid in sorted(snapshot.slots):
        slot = snapshot.slots[sid]
        mem = f"{_num(slot.mem_used_mib)}/{_num(slot.mem_total_mib)}"
        backends = ", ".join(
            f"{clean(b.name)}({b.state.value})" for b in snapshot.backends_on(slot.id)
        )
        lines.append(
            f"{clean(sid)[:28]:<28} {clean(slot.profile or '')[:14]:<14} "
            f"{_num(slot.activity_pct, '%'):>8} {mem:>15}  {backends}"
        )
    if snapshot.backends:
        lines.append("")
        lines.append(
            f"{'BACKEND':<24} {'SLOT':<24} {'STATE':<9} {'WEIGHT':>6} {'INFL':>5} "
            f"{'P95/SLO ms':>13} {'REQ/S':>7} {'READY':<5}"
        )
        for name in sorted(snapshot.backends):
            b = snapshot.backends[name]
            lat = snapshot.latency.get(name)
            slo = snapshot.slo_p95_ms.get(name)
            p95 = _num(lat.p95_ms if lat else None) + ("" if slo is None else f"/{_num(slo)}")
            lines.append(
                f"{clean(name)[:24]:<24} {clean(b.slot_id or '')[:24]:<24} "
                f"{b.state.value:<9} {_num(b.weight):>6} {_num(b.inflight):>5} {p95:>13} "
                f"{_num(lat.req_per_s if lat else None, digits=1):>7} "
                f"{_ready_word(snapshot, name):<5}"
            )
    if snapshot.queues:
        lines.append("")
        lines.append(
            f"{'QUEUE':<20} {'WAITING':>7} {'PENDING':>8} {'LAG':>7} {'OLDEST':>8} {'LEN':>7}"
        )
        for stream in sorted(snapshot.queues):
            q = snapshot.queues[stream]
            lines.append(
                f"{clean(stream)[:20]:<20} {_num(q.waiting):>7} {_num(q.pending):>8} "
                f"{_num(q.lag):>7} {_num(q.oldest_age_s, 's', 1):>8} {_num(q.length):>7}"
            )
    if snapshot.alerts:
        lines.append("")
        for alert in snapshot.alerts:
            lines.append(
                f"! {alert.severity.name.lower():<8} {clean(alert.target)}: {clean(alert.message)}"
            )
    return lines


def _demo_hub(args: argparse.Namespace) -> Any:
    """The simulator, with the demo's SLOs (and the config's, when there is one)."""
    import importlib
    from pathlib import Path

    from gpucon.config import ConfigMissing, GpuconConfig, load_config
    from gpucon.hub import Hub

    try:
        sim = importlib.import_module("gpucon.sources.sim")
    except ModuleNotFoundError:
        raise SystemExit("gpucon snapshot --demo: the simulator is not in this build") from None
    try:
        source = sim.SimSource.for_demo(args.seed, args.scenario, args.size)
    except ValueError as exc:
        raise SystemExit(f"gpucon snapshot: {exc}") from None
    try:
        config = load_config(Path(args.config) if args.config else None)
    except ConfigMissing:
        config = GpuconConfig()  # the demo needs no setup
    demo_slo = getattr(importlib.import_module("gpucon.sim"), "DEMO_SLO_P95_MS", {})
    return Hub(
        [source],
        thresholds=config.alerts,
        slo_p95_ms_by_model={**demo_slo, **config.slo_p95_ms},
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.demo:
        hub, fleet = _demo_hub(args), "demo"
    else:
        from gpucon.config import ConfigError, load_config
        from gpucon.sources.factory import build_hub

        try:
            config = load_config(Path(args.config) if args.config else None, fleet=args.fleet)
        except ConfigError as exc:
            print(f"gpucon: {exc}", file=sys.stderr)
            return 2
        fleet = config.default_fleet
        hub = build_hub(config, fleet)
        if not hub.sources:
            print(f"gpucon: fleet {fleet!r} names no source; see gpucon config", file=sys.stderr)
            return 2
    try:
        hub.poll_once()
        snapshot = hub.tick()
    finally:
        hub.stop()
    if args.json:
        json.dump(snapshot_document(snapshot, fleet), sys.stdout, indent=1, sort_keys=False)
        sys.stdout.write("\n")
    else:
        print("\n".join(snapshot_text(snapshot, fleet)))
    from gpucon.model.fleet import Health

    # the readiness checks only check what the other sources name: they do not count here
    checkers = {s.name for s in hub.sources if hasattr(s, "observe_backends")}
    statuses = [s for name, s in snapshot.sources.items() if name not in checkers]
    return 1 if statuses and all(s.health is Health.DOWN for s in statuses) else 0
