"""The load probe's own latency floor: probe a backend that answers at once.

Starts the lab's KServe v2 backend with a 0 ms service time (a child process), then measures
 - ``httpx loop``: a bare sequential httpx keep-alive loop (the floor any client pays here);
 - ``probe direct``: the probe engine, concurrency 1, same count;
 - ``probe queue``: the probe through the queue (XADD, scheduler, backend, reply), with
   redis-server and the reference scheduler running too.
The difference between the first two is the probe's own overhead per request.

    .venv/bin/python -m benchmarks.probe_bench [--count 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from gpucon.controls.probe import ProbeBounds, quantile, run_probe
from gpucon.controls.probe_live import DirectSender, QueueSender
from gpucon.lab.lab import LabOptions, LabStack

BODY = {"id": "x", "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": ["x"]}]}


async def httpx_loop(url: str, count: int) -> list[float]:
    out = []
    async with httpx.AsyncClient(timeout=5) as client:
        for _ in range(count):
            t0 = time.perf_counter()
            r = await client.post(f"{url}/v2/models/llm/infer", json=BODY)
            out.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200
    return out


def line(name: str, values: list[float]) -> str:
    v = sorted(values)
    return (
        f"  {name:<13} p50 {quantile(v, 0.5):6.2f} ms  p90 {quantile(v, 0.9):6.2f}  "
        f"p99 {quantile(v, 0.99):6.2f}  mean {statistics.fmean(v):6.2f} ms"
    )


async def bench(url: str, redis_url: str, count: int) -> None:
    await httpx_loop(url, 50)  # warm up
    bare = await httpx_loop(url, count)
    bounds = ProbeBounds(count=count, rate_per_s=10_000.0, concurrency=1, duration_s=120.0)
    direct = await run_probe(DirectSender(url, "llm", 5.0, 1), bounds, target="b", mode="direct")
    queue = await run_probe(
        QueueSender(redis_url, "gen:queue", "llm", 5.0), bounds, target="b", mode="queue"
    )
    print(f"probe floor against a backend answering at once, {count} sequential requests:")
    print(line("httpx loop", bare))
    for name, result in (("probe direct", direct), ("probe queue", queue)):
        lat = result.latency_ms
        assert result.succeeded == count, result.errors
        print(
            f"  {name:<13} p50 {lat['p50']:6.2f} ms  p90 {lat['p90']:6.2f}  "
            f"p99 {lat['p99']:6.2f}  achieved {result.achieved_rate:7.1f}/s"
        )
    overhead = (direct.latency_ms["p50"] or 0) - quantile(sorted(bare), 0.5)  # type: ignore[operator]
    print(f"  probe's own overhead at p50: {overhead:+.2f} ms per request")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        options = LabOptions(backends=1, service_ms=0.0, directory=Path(tmp), prometheus=False)
        with LabStack(options) as stack:
            asyncio.run(bench(stack.backends[0].url, stack.redis_url, args.count))


if __name__ == "__main__":
    main()
