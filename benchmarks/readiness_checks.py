"""Readiness checks at fleet scale: checks made against checks due, and their CPU.

Run: ``.venv/bin/python -m benchmarks.readiness_checks [--seconds 30] [--backends 56 200]
[--rounds 1] [--base DIR] [--write]``.

N real HTTP/1.1 servers on loopback (the lab's own server, ``gpucon.lab.http_server``, which
keeps connections alive as a KServe backend does; one listening port per backend, all in one
child process so that serving them is not counted) answer ``GET /v2/health/ready``. A child
process reads ``ReadinessSource`` as the hub does (the next read one cadence after the last
one finished, 0.5 s by default) for ``--seconds``, after 3 s of warm-up, and reports:

- checks/s answered (``round_trips``) against checks/s due (N backends every cadence);
- reads/s and each read's duration (median and max);
- the checking process's CPU (user + system, every thread), as CPU-seconds per minute.

``--base DIR`` runs another checkout's ``gpucon`` the same way (make one with ``git -C
/work/main archive HEAD | tar -x -C /tmp/base``), interleaved with this tree's: for each round,
each N, this tree then the base. ``--write`` records the table in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SECTION = "## Readiness checks at 56 and 200 backends"
HERE = Path(__file__).resolve()
TREE = HERE.parent.parent


def serve(count: int) -> None:
    """Child: ``count`` lab HTTP servers on loopback; prints their ports, serves until killed."""
    import asyncio

    from gpucon.lab.http_server import HttpServer, Request, Response

    async def handle(req: Request) -> Response:
        if req.path == "/v2/health/ready":
            return Response(200, b"", "text/plain")
        return Response(404, b"", "text/plain")

    async def run() -> None:
        ports = []
        for _ in range(count):
            server = HttpServer(handle)
            await server.start("127.0.0.1", 0)
            ports.append(server.port)
        print(",".join(map(str, ports)), flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def check(ports: list[int], seconds: float, warmup_s: float = 3.0) -> dict[str, float]:
    """Child: read a ReadinessSource (whichever ``gpucon`` is on the path) at its cadence."""
    from gpucon.sources.readiness import ReadinessSource

    source = ReadinessSource()
    source.observe_backends({f"b{i}": f"http://127.0.0.1:{p}" for i, p in enumerate(ports)})
    checks = reads = 0
    durations: list[float] = []
    t0 = time.monotonic()
    measuring = False
    cpu0 = time.process_time()
    start = t0
    while True:
        now = time.monotonic()
        if not measuring and now - t0 >= warmup_s:
            measuring, start, cpu0 = True, now, time.process_time()
        if measuring and now - start >= seconds:
            break
        began = time.monotonic()
        reading = source.read()
        took = time.monotonic() - began
        if measuring:
            checks += reading.round_trips
            reads += 1
            durations.append(took)
        time.sleep(max(0.0, source.cadence_s - (time.monotonic() - began - took)))
    elapsed = time.monotonic() - start
    cpu = time.process_time() - cpu0
    source.close()
    return {
        "checks_per_s": checks / elapsed,
        "due_per_s": len(ports) / source.cadence_s,
        "reads_per_s": reads / elapsed,
        "read_ms_median": 1000 * statistics.median(durations),
        "read_ms_max": 1000 * max(durations),
        "cpu_s_per_min": 60 * cpu / elapsed,
    }


def run_child(tree: Path, ports: list[int], seconds: float) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    argv = [sys.executable, str(HERE), "--check", ",".join(map(str, ports))]
    argv += ["--seconds", str(seconds)]
    out = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def spread(values: list[float], digits: int = 1) -> str:
    """min/median/max."""
    return "/".join(
        f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values))
    )


def table(runs: dict[tuple[str, int], list[dict[str, float]]]) -> str:
    lines = [
        "| code | backends | checks/s (due) | reads/s | read ms (median, max) | CPU-s/min |",
        "|---|---|---|---|---|---|",
    ]
    for (kind, n), rs in runs.items():
        due = rs[0]["due_per_s"]
        lines.append(
            f"| {kind} | {n} | {spread([r['checks_per_s'] for r in rs])} ({due:.0f}) "
            f"| {spread([r['reads_per_s'] for r in rs], 2)} "
            f"| {statistics.median(r['read_ms_median'] for r in rs):.1f}, "
            f"{max(r['read_ms_max'] for r in rs):.0f} "
            f"| {spread([r['cpu_s_per_min'] for r in rs], 2)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--backends", type=int, nargs="+", default=[56, 200])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--base", type=Path, default=None, help="another checkout, interleaved")
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--check", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.check:
        ports = [int(p) for p in args.check.split(",")]
        print(json.dumps(check(ports, args.seconds)))
        return

    trees = [("this tree", TREE)] + ([("base", args.base.resolve())] if args.base else [])
    server = subprocess.Popen(
        [sys.executable, str(HERE), "--serve", str(max(args.backends))],
        env=dict(os.environ, PYTHONPATH=str(TREE)),
        stdout=subprocess.PIPE,
        text=True,
    )
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        assert server.stdout is not None
        ports = [int(p) for p in server.stdout.readline().split(",")]
        for _ in range(args.rounds):
            for n in args.backends:
                for kind, tree in trees:
                    result = run_child(tree, ports[:n], args.seconds)
                    runs.setdefault((kind, n), []).append(result)
                    print(kind, n, {k: round(v, 2) for k, v in result.items()}, flush=True)
    finally:
        server.kill()
        server.wait()
    load = os.getloadavg()
    text = table(runs)
    print(text)
    if args.write:
        from benchmarks.results_file import write_section

        note: dict[str, Any] = {
            "machine": f"{platform.system().lower()}, {os.cpu_count()} CPUs (shared)",
            "python": platform.python_version(),
        }
        write_section(
            SECTION,
            f"{SECTION}\n\n"
            f"Machine: {note['machine']}, Python {note['python']}; {began}, load average "
            f"{load[0]:.1f} at the end. `python -m benchmarks.readiness_checks --seconds "
            f"{args.seconds:g} --rounds {args.rounds}"
            f"{' --base ' + str(args.base) if args.base else ''}`: N loopback HTTP/1.1 "
            "servers (the lab's, keep-alive), the source read as the hub reads it (the next "
            "read 0.5 s after the last one ended) in its own process; min/median/max over "
            "rounds.\n\n" + text + "\n",
        )


if __name__ == "__main__":
    main()
