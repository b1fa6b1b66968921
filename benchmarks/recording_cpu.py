"""What recording costs a 512-GPU console's process, quickly: a demo hub ticking in real time
with and without a recorder, in child processes run in turn (and a ``--base`` checkout's
recorder), the process's CPU and each thread's, from /proc.

Run: ``.venv/bin/python -m benchmarks.recording_cpu [--seconds 60] [--rounds 3] [--base DIR]
[--writer-frames] [--fresh]`` (``--writer-frames``: also this tree's recorder framing every
snapshot on its own thread, as it did until the eighth round, rather than the deltas on the
hub's; ``--fresh``: the simulator's entities handed on as new objects each read, equal to the
last ones where nothing moved, as NVML, Prometheus and Redis readings are parsed afresh: the
simulator itself hands on the same objects). Prints min/median/max per kind, the file's growth
in MB an hour, and each recorder's overhead over plain by the medians; writes nothing
(``benchmarks.recording`` measures the whole console in a pty and writes RESULTS.md).

Each child is the console's core without its UI: the hub over the simulated fleet, the
console's garbage-collector pacing (``commands/gc_pace.py``, collections between ticks), the
recorder subscribed or not. The process's CPU is counted over ``--seconds`` after a warm-up
(a keyframe falls in every window longer than a minute); per thread: the hub's, the
recorder's, the source reads' workers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _path(tree: object) -> str:
    """A child's PYTHONPATH: ``tree`` first, then what this process was given (where a
    dependency installed beside the environment is found)."""
    given = os.environ.get("PYTHONPATH")
    return f"{tree}{os.pathsep}{given}" if given else str(tree)


_CHILD = """
import gc, json, os, sys, tempfile, time
from pathlib import Path
from gpucon.hub import Hub
from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
from gpucon.sim.source import SimSource
try:
    from gpucon.commands import gc_pace
except ImportError:
    gc_pace = None

TICK = os.sysconf("SC_CLK_TCK")

def threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out

def by_name(before, after):
    import threading
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    got = {}
    for tid, (name, cpu) in after.items():
        name = names.get(tid, name)
        name = "read" if name.startswith("ThreadPool") or name.startswith("gpucon-read") else name
        got[name] = got.get(name, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return got

size, warm_s, seconds, mode = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
writer_frames = len(sys.argv) > 5 and sys.argv[5] == "writer"
fresh = len(sys.argv) > 6 and sys.argv[6] == "fresh"


class Fresh:
    # the simulator read as a real source reads: every entity a new object each read, equal
    # to the last one where its values did not move (NVML, Prometheus and Redis answers are
    # parsed afresh; the simulator itself hands on the same objects)

    def __init__(self, sim):
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.sim, name)

    def __setattr__(self, name, value):
        if name == "sim":
            object.__setattr__(self, name, value)
        else:
            setattr(self.sim, name, value)

    def read(self):
        import copy
        import msgspec
        got = self.sim.read()
        kinds = ("gpus", "slots", "backends", "queues", "latency", "nodes")
        return msgspec.structs.replace(
            got, **{k: tuple(map(copy.copy, getattr(got, k))) for k in kinds}
        )
if gc_pace is not None:
    gc.set_threshold(gc_pace.BACKSTOP_YOUNG, gc_pace.MIDDLE_THRESHOLD, gc_pace.OLD_THRESHOLD)
with tempfile.TemporaryDirectory() as name:
    source = SimSource.for_demo(7, None, size)
    hub = Hub([Fresh(source) if fresh else source], refresh_s=1.0,
              slo_p95_ms_by_model=DEMO_SLO_P95_MS, rate_window=DEMO_RATE_WINDOW)
    if gc_pace is not None:
        hub.between_ticks = gc_pace.collect_between_ticks
    recorder = None
    if mode == "record":
        from gpucon.recording.recorder import Recorder
        # the hub's findings of what changed, where this tree's hub keeps its own
        kw = {"moves": hub.moves} if hasattr(hub, "moves") else {}
        if writer_frames:  # every snapshot framed on the recorder's thread, not the hub's
            kw["caller_frames"] = False
        recorder = Recorder(Path(name) / "live.sqlite", fleet="demo", refresh_s=1.0, **kw)
        hub.subscribe(recorder)
    hub.start(lambda _: None)
    time.sleep(warm_s)
    size0 = recorder.store.size_bytes() if recorder is not None else 0
    t0, c0, began = threads(), time.process_time(), time.monotonic()
    time.sleep(seconds)
    t1, c1, took = threads(), time.process_time(), time.monotonic() - began
    grown = recorder.store.size_bytes() - size0 if recorder is not None else 0
    per = {k: v * 1000.0 / took for k, v in by_name(t0, t1).items()}
    frames = recorder.frames_written if recorder is not None else 0
    hub.stop()
    if recorder is not None:
        recorder.close()
print(json.dumps({"ms_per_s": (c1 - c0) * 1000.0 / took, "threads": per, "frames": frames,
                  "mb_per_h": grown / took * 3600 / 1e6}))
"""


def child(
    tree: Path,
    size: int,
    warm_s: float,
    seconds: float,
    mode: str,
    variant: str = "",
    fresh: bool = False,
) -> dict[str, object]:
    """One child's figures (``tree``'s gpucon; ``variant``: "writer" for a recorder framing
    on its own thread, "" for its default; ``fresh``: every entity a new object each read)."""
    env = dict(os.environ, PYTHONPATH=_path(str(tree)))
    argv = [sys.executable, "-P", "-c", _CHILD, str(size), str(warm_s), str(seconds), mode]
    argv += [variant or "-", "fresh" if fresh else "-"]
    out = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, check=True)
    found: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def spread(values: list[float]) -> str:
    return "/".join(f"{v:.1f}" for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warm", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, default=None, help="another checkout's recorder")
    parser.add_argument("--no-plain", action="store_true", help="only the recorders")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="every entity a new object each read, as a real source hands them on",
    )
    parser.add_argument(
        "--writer-frames",
        action="store_true",
        help="also this tree's recorder framing every snapshot on its own thread",
    )
    args = parser.parse_args()
    kinds: list[tuple[str, Path, str, str]] = (
        [] if args.no_plain else [("plain", ROOT, "plain", "")]
    )
    kinds.append(("record", ROOT, "record", ""))
    if args.writer_frames:
        kinds.append(("record-writer-frames", ROOT, "record", "writer"))
    if args.base is not None:
        kinds.append(("base", args.base.resolve(), "record", ""))
    total: dict[str, list[float]] = {k[0]: [] for k in kinds}
    per: dict[str, dict[str, list[float]]] = {k[0]: {} for k in kinds}
    sizes: dict[str, list[float]] = {k[0]: [] for k in kinds}
    for _ in range(args.rounds):
        for kind, tree, mode, variant in kinds:
            got = child(tree, args.size, args.warm, args.seconds, mode, variant, args.fresh)
            ms = float(got["ms_per_s"])  # type: ignore[arg-type]
            total[kind].append(ms)
            threads: dict[str, float] = got["threads"]  # type: ignore[assignment]
            for name, v in threads.items():
                per[kind].setdefault(name, []).append(v)
            shown = ", ".join(f"{n} {v:.1f}" for n, v in sorted(threads.items()) if v >= 0.5)
            mb = float(got.get("mb_per_h", 0.0))  # type: ignore[arg-type]
            grown = f", the file {mb:.0f} MB/h" if mode == "record" else ""
            sizes[kind].append(mb)
            print(f"  {kind}: {ms:.1f} ms/s ({shown}){grown}", flush=True)
    for kind, *_ in kinds:
        names = ", ".join(f"{n} {spread(v)}" for n, v in sorted(per[kind].items()) if max(v) >= 0.5)
        print(f"{kind}: {spread(total[kind])} ms of CPU a second (min/median/max); {names}")
        if max(sizes[kind]) > 0:
            print(f"  the file grew {spread(sizes[kind])} MB an hour")
    plain = total.get("plain")
    if plain:
        for kind, *_ in kinds:
            if kind != "plain":
                more = 100 * (statistics.median(total[kind]) / statistics.median(plain) - 1)
                print(f"{kind} vs plain (medians): {more:+.1f} %")


if __name__ == "__main__":
    main()
