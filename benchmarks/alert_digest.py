"""Digests of every tick's alerts and readings, per scenario and fleet size: a per-tick work
change (a cheaper rule, a cheaper simulator step) must leave both exactly as they were.

``python -m benchmarks.alert_digest [--ticks 180] [--base DIR]`` runs the demo fleet in each
scenario, 512 GPUs calm and with two incidents, and 512 GPUs with every value changing
(``benchmarks.churn``) for ``--ticks`` ticks of a frozen clock, and prints, per run, the number
of alerts, their rules, a digest of every tick's alerts (key, severity, message, since) and one
of every reading (GPUs, slots, backends, latency, queues). ``--base DIR`` runs another checkout
too (its ``gpucon``, this checkout's harness) and says whether every digest is the same.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIZES: tuple[tuple[str | None, int | None, bool], ...] = (
    (None, 512, False),
    ("slice-memory-leak", 512, False),
    ("backend-down", 512, False),
    (None, 512, True),
    ("slice-memory-leak", 512, True),
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def _churn_source() -> Any:
    """This checkout's ``ChurnSource``, loaded by path (the same for either checkout)."""
    spec = importlib.util.spec_from_file_location("alert_digest_churn", HERE / "churn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ChurnSource


def digest(scenario: str | None, size: int | None, churn: bool, ticks: int) -> str:
    """One run's line: its alerts' count, rules and digest, and its readings' digest."""
    import gpucon.sim.layout
    from gpucon.hub import Hub
    from gpucon.sim import DEMO_SLO_P95_MS
    from gpucon.sim.source import SimSource

    if size is not None:
        gpucon.sim.layout.MAX_SIZE = max(gpucon.sim.layout.MAX_SIZE, size)
    clock = Clock()
    sim = SimSource.for_demo(7, scenario, size, clock=clock)
    source = _churn_source()(sim) if churn else sim
    hub = Hub([source], refresh_s=1.0, clock=clock, slo_p95_ms_by_model=DEMO_SLO_P95_MS)
    alerts, readings = hashlib.sha256(), hashlib.sha256()
    count = 0
    rules: set[str] = set()
    for _ in range(ticks):
        clock.now += 1.0
        hub.poll_once()
        snapshot = hub.tick()
        for a in snapshot.alerts:
            alerts.update(repr((a.key, a.severity, a.message, a.since)).encode())
            rules.add(a.rule)
        count += len(snapshot.alerts)
        alerts.update(b"|")
        for part in (snapshot.gpus, snapshot.slots, snapshot.backends, snapshot.latency):
            readings.update(repr(sorted(part.items())).encode())
        readings.update(repr(sorted(snapshot.queues.items())).encode())
    return (
        f"{scenario or 'calm'!s:18} {size or 'demo'!s:5} churn={churn!s:5} alerts={count:6} "
        f"rules={','.join(sorted(rules)) or '-'} A={alerts.hexdigest()[:16]} "
        f"R={readings.hexdigest()[:16]}"
    )


def _runs(ticks: int) -> list[str]:
    from gpucon.sim.scenarios import SCENARIOS

    runs = [(s, None, False) for s in (None, *SCENARIOS)] + list(SIZES)
    return [digest(scenario, size, churn, ticks) for scenario, size, churn in runs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=180)
    parser.add_argument("--base", default=None, help="another checkout, compared with this one")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or args.base is None:
        for line in _runs(args.ticks):
            print(line, flush=True)
        return 0
    outputs = []
    for tree in (HERE.parent, Path(args.base).resolve()):
        env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{HERE.parent}")
        cmd = [sys.executable, str(HERE / "alert_digest.py"), "--child", "--ticks", str(args.ticks)]
        out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
        outputs.append(out.stdout.splitlines())
        print(f"-- {'now' if tree == HERE.parent else 'before'}\n{out.stdout}", end="")
    same = outputs[0] == outputs[1]
    print("every digest the same" if same else "DIGESTS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
