"""Round trips per tick and read time of the Redis and Prometheus sources, at 8 and 512 GPUs.

Run: ``.venv/bin/python -m benchmarks.round_trips [--reads 20] [--write]``.

Real servers on loopback: a ``redis-server`` holding two request streams with consumer groups
and a registry of ~7 backends per GPU (3,584 at 512 GPUs), and a ``prometheus`` scraping an
exporter that serves dcgm-exporter series for every GPU (half of them cut in 7 MIG slices)
and Triton series for every backend. Round trips are counted twice: as the source reports
them, and independently — Redis: socket writes of the source's connection; Prometheus: its
own ``prometheus_http_requests_total{handler="/api/v1/query"}``. ``--write`` records the
table in benchmarks/RESULTS.md under "## Round trips per tick".
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

from benchmarks.results_file import write_section
from gpucon.model.reading import Reading
from gpucon.registry import keys
from gpucon.sources.prometheus import PrometheusSource
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.prometheus import (
    MetricsExporter,
    TritonCounters,
    dcgm_health_series,
    dcgm_series,
    prometheus_server,
)
from tests.helpers.servers import redis_server

SECTION = "## Round trips per tick"
SIZES = (8, 512)
NOTE = (
    "\nRound trips are fixed by construction (Redis: one pipeline; Prometheus: one instant "
    "query per metric family, 13 families) and do not grow from 8 to 512 GPUs; read time grows "
    "with the data returned. The machine is shared with other engineers' runs, so read times "
    "vary by about 2x from run to run."
)
SLICES_PER_MIG_GPU = 7
GPUS_PER_HOST = 8


@dataclass(frozen=True)
class Row:
    source: str
    gpus: int
    entities: str
    reported: int
    counted: int
    median_ms: float
    p95_ms: float


def layout(gpus: int) -> list[tuple[str, int, int | None]]:
    """(host, gpu index, GPU instance id or None) per slot: even GPUs MIG, odd GPUs whole."""
    slots: list[tuple[str, int, int | None]] = []
    for g in range(gpus):
        host, index = f"node-{g // GPUS_PER_HOST:03d}", g % GPUS_PER_HOST
        if g % 2 == 0:
            slots += [(host, index, gi) for gi in range(1, SLICES_PER_MIG_GPU + 1)]
        else:
            slots.append((host, index, None))
    return slots


def timed_reads(read: Callable[[], Reading], n: int) -> tuple[list[Reading], list[float]]:
    readings, times = [], []
    for _ in range(n):
        start = time.perf_counter()
        readings.append(read())
        times.append((time.perf_counter() - start) * 1000.0)
    return readings, times


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


# -- Redis ---------------------------------------------------------------------------------------


def fill_redis(url: str, gpus: int) -> int:
    r = redis.Redis.from_url(url)
    r.flushall()
    backends = SLICES_PER_MIG_GPU * gpus  # ~3,500 at 512 GPUs
    pipe = r.pipeline(transaction=False)
    for i in range(backends):
        name = f"b{i:05d}"
        pipe.sadd(keys.BACKENDS, name)
        pipe.hset(
            keys.backend_key(name),
            mapping={
                "slot": f"node-{i // 56:03d}/gpu{i % 8}/gi{i % 7 + 1}",
                "weight": "1",
                "state": "active",
                "inflight": "2",
                "url": f"http://10.0.{i // 250}.{i % 250}:8000",
                "model": "sdxl",
            },
        )
    for stream in ("gen:queue", "gen:queue:llm"):
        pipe.xgroup_create(stream, "g1", id="$", mkstream=True)
        for _ in range(200):
            pipe.xadd(stream, {"prompt": "x"})
    pipe.execute()
    for stream in ("gen:queue", "gen:queue:llm"):
        r.xreadgroup("g1", "sched", {stream: ">"}, count=50)
    r.close()
    return backends


def bench_redis(url: str, gpus: int, reads: int) -> Row:
    backends = fill_redis(url, gpus)
    source = RedisQueueSource(url, streams=("gen:queue", "gen:queue:llm"), timeout_s=5.0)
    source.read()  # connect outside the measurement
    sends = 0
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: redis.connection.AbstractConnection, *args: object, **kw: object) -> None:
        nonlocal sends
        sends += 1
        original(self, *args, **kw)  # type: ignore[arg-type, no-untyped-call]

    redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        readings, times = timed_reads(source.read, reads)
    finally:
        redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
        source.close()
    last = readings[-1]
    assert len(last.backends) == backends, (len(last.backends), backends, last.error)
    return Row("redis", gpus, f"{backends} backends, 2 streams", last.round_trips,
               round(sends / reads), statistics.median(times), p95(times))  # fmt: skip


# -- Prometheus ----------------------------------------------------------------------------------


def exposition(gpus: int) -> Callable[[], str]:
    static: list[str] = []
    for i, (host, index, gi) in enumerate(layout(gpus)):
        uuid = f"GPU-{host}-{index:02d}"
        profile = "1g.10gb" if gi else None
        static += dcgm_series(
            host=host, gpu=index, uuid=uuid, gi_id=gi, profile=profile, gr_active=(i % 100) / 100
        )
        # temperature, power, utilisation, XID: the exporter repeats them on each MIG instance
        static += dcgm_health_series(host=host, gpu=index, uuid=uuid, gi_id=gi)
    triton = [
        TritonCounters(summary_ms={"0.5": 50, "0.95": 90, "0.99": 120},
                       failures_per_s={"REJECTED": 0.1}, extra_labels={"backend": f"b{i:05d}"})
        for i in range(len(layout(gpus)))
    ]  # fmt: skip
    head = "\n".join(static)

    def render() -> str:
        return head + "\n" + "\n".join(line for t in triton for line in t.lines()) + "\n"

    return render


def query_requests(url: str) -> float:
    """Instant queries Prometheus has answered, from its own /metrics (not a query itself)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line
    )


def bench_prometheus(tmp: Path, gpus: int, reads: int) -> Row:
    slots = len(layout(gpus))
    (tmp / f"prom{gpus}").mkdir()
    with (
        MetricsExporter(exposition(gpus)) as exporter,
        prometheus_server(tmp / f"prom{gpus}", [exporter.address], scrape_interval_s=2.0,
                          settle_s=4.5) as url,
    ):  # fmt: skip
        source = PrometheusSource(url, timeout_s=10.0, rate_window="4s")
        source.read()
        before = query_requests(url)
        readings, times = timed_reads(source.read, reads)
        counted = query_requests(url) - before
        source.close()
    last = readings[-1]
    assert len(last.slots) == slots, (len(last.slots), slots, last.error)
    assert len(last.latency) == slots, (len(last.latency), last.error)
    return Row("prometheus", gpus, f"{slots} slots, {slots} backends", last.round_trips,
               round(counted / reads), statistics.median(times), p95(times))  # fmt: skip


# -- report --------------------------------------------------------------------------------------


def table(rows: list[Row], reads: int) -> str:
    lines = [
        SECTION,
        "",
        f"`python -m benchmarks.round_trips --reads {reads}` on {platform.node()} "
        f"({platform.processor() or platform.machine()}, shared 2-core VM), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Real redis-server and "
        "prometheus on loopback. *reported*: the Reading's `round_trips`; *counted*: "
        "independently (Redis: socket writes of the source's connection per read; "
        'Prometheus: the `prometheus_http_requests_total{handler="/api/v1/query"}` its '
        "own /metrics shows, per read). Prometheus's queries go out together on 4 threads "
        "(the first alone), so its read time is about the slowest query plus parsing.",
        "",
        "| source | GPUs | fleet | round trips (reported) | round trips (counted) "
        "| read median ms | read p95 ms |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.source} | {r.gpus} | {r.entities} | {r.reported} | {r.counted} "
            f"| {r.median_ms:.1f} | {r.p95_ms:.1f} |"
        )
    lines.append(NOTE)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with redis_server(tmp) as url:
            rows += [bench_redis(url, gpus, args.reads) for gpus in SIZES]
        rows += [bench_prometheus(tmp, gpus, args.reads) for gpus in SIZES]
    text = table(rows, args.reads)
    print(text)
    for source in ("redis", "prometheus"):
        counts = {r.counted for r in rows if r.source == source}
        print(
            f"{source}: round trips per tick {'constant' if len(counts) == 1 else 'GROW'}: {counts}"
        )
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
