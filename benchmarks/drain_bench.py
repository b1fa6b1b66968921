"""How long from confirming a drain until the scheduler sends the backend no new work.

Runs the real lab stack (redis-server, the reference scheduler and 3 KServe v2 backends as
child processes) under steady queue traffic, then repeats: undrain, let the backend take work,
confirm a drain (the real drain action under the guard: lock, audit, registry writes) and
measure, from the moment of confirming:
  - ``draining_written``: the drain's first step (state=draining in the registry) done;
  - ``last_assigned``: the last entry the scheduler assigned to the backend (Redis TIME in the
    assignment script; 0 if nothing was assigned after confirming);
  - ``last_arrival``: the last request that reached the backend;
  - ``drained``: the whole drain done (in-flight and pending at 0, state=drained).

    .venv/bin/python -m benchmarks.drain_bench [--repeat 20] [--rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import redis

from gpucon.actions.drain import apply_drain, apply_undrain, plan_drain, plan_undrain
from gpucon.actions.guard import execute
from gpucon.actions.plan import ProgressEvent, StepStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.lab import LabOptions, LabStack
from gpucon.lab.traffic import TrafficSpec, generate

TARGET = "lab-b1"


def served(url: str) -> list[dict[str, Any]]:
    log: list[dict[str, Any]] = httpx.get(f"{url}/lab/served", timeout=5).json()["served"]
    return log


def traffic_thread(url: str, rate: float, stop: threading.Event) -> threading.Thread:
    async def run() -> None:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(url)
        done = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.05)
            done.set()

        watcher = asyncio.create_task(watch())
        await generate(
            client, TrafficSpec(rate_per_s=rate, max_count=10**6, max_duration_s=3600), done
        )
        await watcher
        await client.aclose()

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    return thread


def one_drain(stack: LabStack, controls: Controls, client: Any) -> dict[str, float]:
    url = {b.name: b.url for b in stack.backends}[TARGET]
    snapshot, _ = read_registry(client)
    execute(apply_undrain, plan_undrain(snapshot, {"backend": TARGET}), controls, lambda e: None)
    time.sleep(0.7)  # it takes work again
    before = len(served(url))
    snapshot, _ = read_registry(client)
    plan = plan_drain(snapshot, {"backend": TARGET, "timeout_s": 30, "poll_s": 0.01})
    marks: dict[str, float] = {}

    def progress(event: ProgressEvent) -> None:
        if event.status is StepStatus.DONE:
            marks[event.step] = time.time()

    confirmed = time.time()
    outcome = execute(apply_drain, plan, controls, progress)
    finished = time.time()
    assert outcome.ok, outcome.message
    time.sleep(0.3)  # anything still arriving would show now
    new = served(url)[before:]
    after = [e for e in new if (e["assigned_at"] or 0) >= confirmed]
    return {
        "draining_written": marks[f"draining:{TARGET}"] - confirmed,
        "last_assigned": max([e["assigned_at"] - confirmed for e in after] + [0.0]),
        "assigned_after": float(len(after)),
        "assigned_after_draining": float(
            sum(1 for e in after if e["assigned_at"] > marks[f"draining:{TARGET}"])
        ),
        # 0: nothing reached it after confirming
        "last_arrival": max([e["arrived_at"] - confirmed for e in new] + [0.0]),
        "drained": finished - confirmed,
        "late_arrivals": float(sum(1 for e in new if e["arrived_at"] > finished)),
    }


def summarize(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return (
        f"{name:<17} median {statistics.median(values) * 1000:7.1f} ms   "
        f"p95 {p95 * 1000:7.1f} ms   max {ordered[-1] * 1000:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--service-ms", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stack = LabStack(
            LabOptions(backends=3, service_ms=args.service_ms, directory=Path(tmp) / "lab",
                       prometheus=False)
        )  # fmt: skip
        stack.start()
        stop = threading.Event()
        try:
            client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
            registry = RedisRegistry.from_url(stack.redis_url)
            controls = Controls(registry, AuditLog(Path(tmp) / "audit.jsonl"), "bench@lab")
            thread = traffic_thread(stack.redis_url, args.rate, stop)
            time.sleep(1.0)
            runs = [one_drain(stack, controls, client) for _ in range(args.repeat)]
            stop.set()
            thread.join(5)
            controls.close()
            client.close()
        finally:
            stack.stop()
    print(f"drain under {args.rate:g} req/s over 3 backends ({args.service_ms:g} ms service), "
          f"{args.repeat} drains, times from confirming:")  # fmt: skip
    for key in ("draining_written", "last_assigned", "last_arrival", "drained"):
        print("  " + summarize(key, [r[key] for r in runs]))
    print(f"  entries assigned to it after confirming: "
          f"{int(sum(r['assigned_after'] for r in runs))}")  # fmt: skip
    print(f"  entries assigned to it after the draining write: "
          f"{int(sum(r['assigned_after_draining'] for r in runs))}")  # fmt: skip
    print(f"  requests reaching the backend after the drain returned: "
          f"{int(sum(r['late_arrivals'] for r in runs))}")  # fmt: skip


if __name__ == "__main__":
    main()
