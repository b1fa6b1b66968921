"""Redis server time per console tick: the old registry script against the version-gated read.

Run: ``.venv/bin/python -m benchmarks.registry_server_time [--ticks 50] [--repeat 5] [--write]``.

A real ``redis-server`` on loopback holds a registry of 8, 512 and 3,584 backends (hashes as
the lab registers them, plus the scheduler's ``gpucon:inflight`` hash and ``gpucon:ready``
document). For
each size it measures, with ``CONFIG RESETSTAT`` then ``INFO commandstats`` (``usec``: time
the server spent executing, during which it serves no one else):

- *old*: the script the console used to run every tick (SMEMBERS and one HGETALL per backend
  inside one ``EVAL_RO``; kept here only for this comparison). Its inner commands are counted
  inside the script's own time, so only the script's time is summed;
- *new, unchanged*: ``gpucon.registry.read``'s tick when the registry version did not move
  (GET the version, HGETALL ``gpucon:inflight``, GET ``gpucon:ready``);
- *new, changed*: a tick right after a registry write (the version moved): the tick plus
  SMEMBERS and every backend hash, pipelined without MULTI.

It prints µs per tick, the longest single command (how long one tick can hold every other
client off), and the share of one Redis thread 50 consoles at 1 tick/s would take (steady,
and with one registry change per console per minute). ``--write`` records the table in
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from benchmarks.results_file import write_section
from gpucon.registry import keys
from gpucon.registry.parse import ready_text
from gpucon.registry.read import RegistryReader
from tests.helpers.servers import redis_server

SECTION = "## Registry read: Redis server time per tick"
SIZES = (8, 512, 3584)
CONSOLES = 50
CHANGES_PER_MINUTE = 1.0

# The registry read the console ran before gpucon.registry.read (for comparison only).
OLD_REGISTRY_LUA = """
local names = redis.call('SMEMBERS', KEYS[1])
local out = {}
for i = 1, #names do
  out[i] = {names[i], redis.call('HGETALL', ARGV[1] .. names[i])}
end
return out
"""
NOTE = (
    "\nReading: the old read held the server in one piece for the whole script (36.9 ms at "
    "3,584 backends when first measured here; the figure moves with the machine's load), per "
    "console per tick. The new tick's longest command is `HGETALL gpucon:inflight`; the read "
    "after a registry change is one pipeline of small commands (SMEMBERS, then one HGETALL "
    "per backend, a few µs each) without MULTI, so other clients are served between them. "
    "Goal: <= 2 ms of server time per tick at 3,584 backends."
)
# this benchmark's own commands, never counted
OWN = {"info", "config|resetstat", "incr", "config"}


@dataclass(frozen=True)
class Cost:
    usec_per_tick: float
    longest_usec: float  # the longest single command (one script counts as one)


@dataclass(frozen=True)
class Row:
    backends: int
    old: Cost
    unchanged: Cost
    changed: Cost


def fill(client: Any, n: int) -> None:
    client.flushall()
    pipe = client.pipeline(transaction=False)
    now = time.time()
    for i in range(n):
        name = f"b{i:05d}"
        pipe.hset(
            keys.backend_key(name),
            mapping={
                "slot": f"node-{i // 56:03d}/gpu{i % 8}/gi{i % 7 + 1}",
                "url": f"http://10.0.{i // 250}.{i % 250}:8000",
                "model": "bert-base",
                "weight": "1.0",
                "state": "active",
                "owner": "gpucon-lab",
                "reason": "registered by gpucon lab",
            },
        )
        pipe.sadd(keys.BACKENDS, name)
        pipe.hset(keys.INFLIGHT, name, i % 5)
    pipe.set(keys.READY, ready_text({f"b{i:05d}": (i % 7 != 0, now) for i in range(n)}))
    pipe.incr(keys.VERSION)
    pipe.execute()


def measure(
    client: Any, tick: Callable[[], object], ticks: int, only: str | None, repeat: int
) -> Cost:
    """The median over ``repeat`` runs of ``ticks`` ticks (a shared machine descheduling the
    server inflates single runs) of server µs per tick and of the longest command."""
    runs = [measure_once(client, tick, ticks, only) for _ in range(repeat)]
    return Cost(
        statistics.median(r.usec_per_tick for r in runs),
        statistics.median(r.longest_usec for r in runs),
    )


def measure_once(client: Any, tick: Callable[[], object], ticks: int, only: str | None) -> Cost:
    """Server µs per tick (``only``: that command's time alone) and the longest command."""
    client.config_resetstat()
    for _ in range(ticks):
        tick()
    stats: dict[str, dict[str, float]] = client.info("commandstats")
    total, longest = 0.0, 0.0
    for raw_name, s in stats.items():
        name = raw_name.removeprefix("cmdstat_")
        if name in OWN or (only is not None and name != only):
            continue
        total += float(s["usec"])
        # the mean is what commandstats gives; each tick sends the same commands
        longest = max(longest, float(s["usec_per_call"]))
    return Cost(total / ticks, longest)


def bench(url: str, n: int, ticks: int, repeat: int) -> Row:
    client: Any = redis.Redis.from_url(url, decode_responses=False, socket_timeout=30)
    fill(client, n)
    old = measure(
        client,
        lambda: client.eval_ro(OLD_REGISTRY_LUA, 1, keys.BACKENDS, keys.BACKEND_PREFIX),
        ticks,
        only="eval_ro",
        repeat=repeat,
    )
    reader = RegistryReader()
    first = reader.read(client)  # the first read fetches every hash: outside the measurement
    assert len(first.backends) == n, (len(first.backends), first.problems[:3])
    unchanged = measure(client, lambda: reader.read(client), ticks, only=None, repeat=repeat)

    def changed_tick() -> None:
        client.incr(keys.VERSION)  # a registry write happened since the last tick
        read = reader.read(client)
        assert read.round_trips == 2, read.round_trips

    changed = measure(client, changed_tick, max(3, ticks // 5), only=None, repeat=repeat)
    client.close()
    return Row(n, old, unchanged, changed)


def share_pct(usec_per_tick: float, consoles: int = CONSOLES) -> float:
    """Share of one Redis thread that ``consoles`` at 1 tick/s take."""
    return 100.0 * consoles * usec_per_tick / 1e6


def amortized(row: Row) -> float:
    """µs per tick with CHANGES_PER_MINUTE registry changes per minute (1 tick/s)."""
    per_minute = 60.0
    changes = CHANGES_PER_MINUTE
    return (
        row.unchanged.usec_per_tick * (per_minute - changes) + row.changed.usec_per_tick * changes
    ) / per_minute


def machine() -> str:
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    server = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
    version = next((w.removeprefix("v=") for w in server.stdout.split() if w.startswith("v=")), "?")
    return f"{platform.node()}: `nproc` {nproc}, {model}, redis-server {version}"


def table(rows: list[Row], ticks: int, repeat: int, load: float) -> str:
    lines = [
        SECTION,
        "",
        f"`python -m benchmarks.registry_server_time --ticks {ticks} --repeat {repeat}` on "
        f"{machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{load:.1f} (the machine is shared). Medians of {repeat} runs. Server time is INFO "
        "commandstats `usec` (the server executing the command, serving no one else); "
        "*longest*: the longest single command of a tick (the old read is one script). "
        f"*50 consoles*: share of one Redis thread at 1 tick/s each; *amortized*: with "
        f"{CHANGES_PER_MINUTE:g} registry change per minute (each console then re-reads the "
        "hashes once).",
        "",
        "| backends | old script µs/tick | old longest µs | new µs/tick (unchanged) "
        "| new longest µs | new µs/tick (after a change) | new µs/tick amortized "
        "| 50 consoles old | 50 consoles new (amortized) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.backends:,} | {r.old.usec_per_tick:,.0f} | {r.old.longest_usec:,.0f} "
            f"| {r.unchanged.usec_per_tick:,.0f} | {r.unchanged.longest_usec:,.0f} "
            f"| {r.changed.usec_per_tick:,.0f} | {amortized(r):,.0f} "
            f"| {share_pct(r.old.usec_per_tick):.1f} % "
            f"| {share_pct(amortized(r)):.1f} % |"
        )
    lines.append(NOTE)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as url:
        rows = [bench(url, n, args.ticks, args.repeat) for n in SIZES]
    text = table(rows, args.ticks, args.repeat, os.getloadavg()[0])
    print(text)
    last = rows[-1]
    goal = "met" if last.unchanged.usec_per_tick <= 2000 else "NOT met"
    print(
        f"at {last.backends:,} backends: old {last.old.usec_per_tick / 1000:.1f} ms, new "
        f"{last.unchanged.usec_per_tick / 1000:.2f} ms per tick "
        f"({last.old.usec_per_tick / max(last.unchanged.usec_per_tick, 1):.0f}x less); "
        f"goal <= 2 ms {goal}"
    )
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
