"""The console's CPU with and without ``--record`` at 512 GPUs, and each of its threads':
``gpucon demo --size 512`` in a pty, plain / ``--record`` / a ``--base`` checkout's
``--record`` (``benchmarks.recording.console_cpu``'s runs), CPU-s per minute after the
first data frame, and each thread's CPU (ms a second over a window from 20 s after start) read
from /proc by a probe the child loads through ``sitecustomize`` (named by ``threading``).

Run: ``.venv/bin/python -m benchmarks.recording_threads [--seconds 45] [--rounds 3]
[--base DIR] [--together]``. Prints min/median/max per kind, the overhead from the medians and
pooled (all of a kind's CPU over all the plain runs'); writes nothing. The window runs from the
first data frame to ``--seconds`` + 30 s after start: at 45 the console's 120 ticks of history
are not full yet and the window holds the first keyframe; ``--seconds 150`` measures the
steady state (the history full, keyframes as they come). Recording costs what the
whole process pays more, not only the recorder's thread: this shows where.

``--together``: each round starts the kinds at the same time (each ~3 % of a core, so they
barely share), and the overhead is also given as the median of each round's ratio. Runs in
turn see the host's moments apart (on this VM a plain run alone spread 1.52–2.62 CPU-s/min
with nothing else running); runs side by side see the same moments, so the round's ratio
keeps what recording adds and loses most of what the host adds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from benchmarks.recording import console_cpu, pooled_pct

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
    with tempfile.TemporaryDirectory(prefix="gpucon-rec-threads-") as name:
        out, per_thread = console_cpu(
            args.seconds,
            args.rounds,
            Path(name),
            args.base,
            together=args.together,
            probe=_PROBE,
        )
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
            print(f"  pooled over the {len(ratios)} rounds: {pooled_pct(out, kind):+.1f} %")


if __name__ == "__main__":
    main()
