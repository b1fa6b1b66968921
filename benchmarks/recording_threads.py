"""The console's CPU with and without ``--record`` at 512 GPUs, and each of its threads':
``gpucon demo --size 512`` in a pty, plain / ``--record`` / a ``--base`` checkout's
``--record`` in turn (``benchmarks.recording.console_cpu``'s runs), CPU-s per minute after the
first data frame, and each thread's CPU (ms a second over a window from 20 s after start) read
from /proc by a probe the child loads through ``sitecustomize`` (named by ``threading``).

Run: ``.venv/bin/python -m benchmarks.recording_threads [--seconds 45] [--rounds 3]
[--base DIR] [--together]``. Prints min/median/max per kind and the overhead from the medians;
writes nothing. Recording costs what the whole process pays more, not only the recorder's
thread: this shows where.

``--together``: each round starts the kinds at the same time (each ~3 % of a core, so they
barely share), and the overhead is also given as the median of each round's ratio. Runs in
turn see the host's moments apart (on this VM a plain run alone spread 1.52–2.62 CPU-s/min
with nothing else running); runs side by side see the same moments, so the round's ratio
keeps what recording adds and loses most of what the host adds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.pty_run import run_in_pty
from benchmarks.recording import MARKER_512, ROOT, _path
from benchmarks.startup_cpu import child_env

_PROBE = """
import json, os, threading, time
_out = os.environ.get("GPUCON_THREAD_PROBE")
if _out:
    _tick = os.sysconf("SC_CLK_TCK")
    def _threads():
        got = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as fh:
                    f = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            got[tid] = (int(f[11]) + int(f[12])) / _tick
        return got
    def _probe():
        time.sleep(float(os.environ["GPUCON_THREAD_FROM"]))
        t0, w0, c0 = _threads(), time.monotonic(), time.process_time()
        time.sleep(float(os.environ["GPUCON_THREAD_SPAN"]))
        t1, took, c1 = _threads(), time.monotonic() - w0, time.process_time()
        names = {str(t.native_id): t.name for t in threading.enumerate()}
        out = {"PROCESS": (c1 - c0) * 1000 / took}
        for tid, cpu in t1.items():
            n = names.get(tid, "?")
            n = "read" if n.startswith(("ThreadPool", "gpucon-read", "gpucon-source")) else n
            out[n] = out.get(n, 0.0) + (cpu - t0.get(tid, 0.0)) * 1000 / took
        with open(_out, "w") as fh:
            json.dump(out, fh)
    threading.Thread(target=_probe, name="thread-probe", daemon=True).start()
"""


def spread(values: list[float]) -> str:
    return "/".join(f"{v:.2f}" for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, default=None, help="another checkout's --record")
    parser.add_argument(
        "--together", action="store_true", help="each round's kinds side by side, not in turn"
    )
    args = parser.parse_args()
    argv = [sys.executable, "-P", "-m", "gpucon.commands.cli", "demo", "--size", "512"]
    out: dict[str, list[float]] = {}
    per_thread: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="gpucon-rec-threads-") as name:
        tmp = Path(name)
        (tmp / "site").mkdir()
        (tmp / "site" / "sitecustomize.py").write_text(_PROBE)
        trees = [("plain", ROOT), ("record", ROOT)]
        if args.base is not None:
            trees.append(("base", args.base.resolve()))
        kinds: list[tuple[str, dict[str, str]]] = []
        for kind, tree in trees:
            env = child_env(str(tmp / f"pyc-{kind}"))
            env["PYTHONPATH"] = _path(f"{tree}:{tmp / 'site'}")
            env["GPUCON_THREAD_PROBE"] = str(tmp / f"probe-{kind}.json")
            env["GPUCON_THREAD_FROM"] = "20"
            env["GPUCON_THREAD_SPAN"] = str(max(5.0, args.seconds - 5.0))
            kinds.append((kind, env))
        for _, env in kinds:  # bytecode compiled once, before anything is measured
            run_in_pty(argv, marker=MARKER_512, duration_s=60, stop_at_marker=True, env=env)

        def one(i: int, kind: str, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
            record = [] if kind == "plain" else ["--record", f"{tmp}/{kind}{i}.sqlite"]
            run = run_in_pty(
                [*argv, *record], marker=MARKER_512, duration_s=args.seconds + 30, env=env
            )
            if run.marker_s is None:
                raise SystemExit(f"{kind}: no data frame seen")
            per_min = (run.cpu_s - run.cpu_at_marker_s) / (run.wall_s - run.marker_s) * 60.0
            probe = Path(env["GPUCON_THREAD_PROBE"])
            threads = json.loads(probe.read_text()) if probe.exists() else {}
            probe.unlink(missing_ok=True)
            return per_min, threads

        for i in range(args.rounds):
            if args.together:
                with ThreadPoolExecutor(len(kinds)) as pool:
                    futures = [pool.submit(one, i, kind, env) for kind, env in kinds]
                    results = [f.result() for f in futures]
            else:
                results = [one(i, kind, env) for kind, env in kinds]
            for (kind, _), (per_min, threads) in zip(kinds, results, strict=True):
                out.setdefault(kind, []).append(per_min)
                for n, v in threads.items():
                    per_thread.setdefault(kind, {}).setdefault(n, []).append(v)
                shown = ", ".join(f"{n} {v:.1f}" for n, v in sorted(threads.items()) if v >= 0.3)
                print(f"  {kind}: {per_min:.2f} CPU-s/min ({shown} ms/s)", flush=True)
    for kind, values in out.items():
        print(f"{kind}: {spread(values)} CPU-s/min (min/median/max)")
        threads = per_thread.get(kind, {})
        shown = ", ".join(f"{n} {spread(v)}" for n, v in sorted(threads.items()) if max(v) >= 0.3)
        print(f"  threads, ms/s (min/median/max): {shown}")
    plain = statistics.median(out["plain"])
    for kind in out:
        if kind != "plain":
            more = 100 * (statistics.median(out[kind]) / plain - 1)
            print(f"{kind} vs plain (medians): {more:+.1f} %")
            ratios = [k / p for k, p in zip(out[kind], out["plain"], strict=True)]
            print(f"  round by round ({kind} / plain): {spread(ratios)} (min/median/max)")


if __name__ == "__main__":
    main()
