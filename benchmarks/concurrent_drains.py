"""Ten operators drain one backend at once: how many act?

Runs the real lab stack (redis-server, the reference scheduler and 3 KServe v2 backends as
child processes) under queue traffic, then repeats: undrain ``lab-b1`` and let it take work,
start ten ``gpucon --config LAB drain lab-b1 --yes`` processes at once, wait for all, and
count in that trial's audit file and in the fleet's stream the intents and the ``ok``
outcomes, and the exit codes. Exactly one intent and one ``ok`` per trial is the target; the
other nine should exit 3 (refused: drained already, by whom) or 4 (lock held).

    .venv/bin/python -m benchmarks.concurrent_drains [--trials 20] [--rate 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from benchmarks.drain_bench import traffic_thread
from gpucon.actions.audit import read_audit
from gpucon.actions.drain import apply_undrain, plan_undrain
from gpucon.actions.guard import execute
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.lab import LabOptions, LabStack

TARGET = "lab-b1"


def trial(stack: LabStack, client: Any, controls: Controls, directory: Path, n: int, racers: int
          ) -> dict[str, Any]:  # fmt: skip
    snapshot, _ = read_registry(client)
    if snapshot.backends[TARGET].state != "active":
        execute(
            apply_undrain, plan_undrain(snapshot, {"backend": TARGET}), controls, lambda e: None
        )
    time.sleep(0.5)  # it takes work again
    audit = directory / f"audit-{n}.jsonl"
    env = dict(os.environ, GPUCON_AUDIT_PATH=str(audit), GPUCON_OPERATOR=f"op{n}@bench")
    assert stack.config_path is not None
    argv = [sys.executable, "-m", "gpucon.commands.cli", "--config", str(stack.config_path)]
    argv += ["drain", TARGET, "--yes"]
    last_id = (client.xrevrange("gpucon:audit", count=1) or [("0-0", {})])[0][0]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(racers)
    ]
    codes = [p.wait(timeout=300) for p in procs]
    records = read_audit(audit)
    stream = [f for _, f in client.xrange("gpucon:audit", min=f"({last_id}")]
    return {
        "codes": collections.Counter(codes),
        "intents": sum(r.event == "intent" for r in records),
        "oks": sum(r.event == "outcome" and r.status == "ok" for r in records),
        "stream_intents": sum(f.get("event") == "intent" for f in stream),
        "state": client.hget(f"gpucon:backend:{TARGET}", "state"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--racers", type=int, default=10)
    parser.add_argument("--rate", type=float, default=20.0, help="queue entries per second")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        stack = LabStack(LabOptions(backends=3, prometheus=False, directory=directory))
        stack.start()
        stop = threading.Event()
        try:
            assert stack.redis_url is not None
            traffic = traffic_thread(stack.redis_url, args.rate, stop)
            client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
            registry = RedisRegistry.from_url(stack.redis_url)
            controls = Controls(registry, AuditLog(directory / "setup.jsonl"), "setup@bench")
            good = 0
            for n in range(args.trials):
                got = trial(stack, client, controls, directory, n, args.racers)
                one = got["intents"] == got["oks"] == got["stream_intents"] == 1
                others = sum(c for code, c in got["codes"].items() if code in (3, 4))
                ok = one and got["codes"][0] == 1 and others == args.racers - 1
                good += ok
                codes = " ".join(f"{k}:{v}" for k, v in sorted(got["codes"].items()))
                print(
                    f"trial {n + 1:2d}: intents {got['intents']} (stream {got['stream_intents']})"
                    f", ok {got['oks']}, exit codes {codes}, state {got['state']}"
                    f"{'' if ok else '  <-- NOT ONE'}",
                    flush=True,
                )
            print(f"{good}/{args.trials} trials: exactly 1 intent, 1 ok, the rest exit 3 or 4")
            stop.set()
            traffic.join(timeout=5)
            registry.close()
            client.close()
            return 0 if good == args.trials else 1
        finally:
            stop.set()
            stack.stop()


if __name__ == "__main__":
    raise SystemExit(main())
