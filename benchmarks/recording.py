"""Recording: file size per hour, the console's CPU with and without ``--record``, the
recorder's own CPU, seek time, and ``--alerts-only`` over a long file.

Run: ``.venv/bin/python -m benchmarks.recording [--quick] [--base DIR]``. Writes its section
of benchmarks/RESULTS.md.

- size per hour: the simulated fleet recorded faster than real time (one tick per simulated
  second, keyframes as by default), the file's bytes after close, scaled to an hour; at the
  default demo and at ``--size 512``.
- CPU: ``gpucon demo --size 512`` in a pty, without and with ``--record`` (and with
  ``--base DIR``, that checkout's ``--record`` too), side by side, 4 rounds of 180 s: CPU-s
  per minute after the first data frame, min / median / max; the overhead pooled (all of a
  kind's CPU over all the plain runs'), by medians and round by round.
- the recorder's own CPU: snapshots of a 512-GPU demo hub ticking in real time (as the
  console's, whose sources change more per tick than the simulator run faster than real
  time), then the recorder's frame building and compression over them, in process.
- seek: a 1-hour 512-GPU recording (the first minutes recorded through the simulator, then
  repeated, keyframe groups with shifted times, to fill the hour: seeking reads one keyframe,
  at most two minutes of deltas and the 120 ticks of history, whatever the file holds), then
  ``ReplayCursor.seek`` to random times: CPU time until the snapshot there (what the screen
  shows first), then ``fill_history`` (the plots' 120 ticks, shown next).
- ``--alerts-only``: the alert rules re-run over the first minutes of that hour, CPU per
  frame (an hour is 3,600 frames).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.results_file import write_section
from gpucon.config import KEYFRAME_S
from gpucon.model.snapshot import Snapshot
from gpucon.recording.blobs import BlobWriter
from gpucon.recording.columns import ColumnWriter
from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.recorder import frame_blobs
from gpucon.recording.store import RecordingStore
from gpucon.recording.writer import FrameWriter
from gpucon.session import DemoOptions
from gpucon.session.record import record_simulated

ROOT = Path(__file__).resolve().parents[1]


def _path(tree: object) -> str:
    """A child's PYTHONPATH: ``tree`` first, then what this process was given (where a
    dependency installed beside the environment is found)."""
    given = os.environ.get("PYTHONPATH")
    return f"{tree}{os.pathsep}{given}" if given else str(tree)


HEADING = "## Recording and replay"
GOAL_DEMO_MB_H = 5.0
GOAL_512_MB_H = 200.0
GOAL_CPU_PCT = 10.0
GOAL_SEEK_MS = 300.0


def size_per_hour(size: int | None, seconds: float, tmp: Path) -> tuple[float, float]:
    """(MB per hour, wall seconds it took to record ``seconds`` of simulated time)."""
    path = tmp / f"size-{size}.sqlite"
    began = time.perf_counter()
    record_simulated(path, seconds=seconds, demo=DemoOptions(7, None, size))
    took = time.perf_counter() - began
    return path.stat().st_size / 1e6 * 3600.0 / seconds, took


def live_snapshots(size: int, seconds: float) -> list[Snapshot]:
    """The snapshots a ``gpucon demo --size SIZE`` hub makes in ``seconds`` of real time."""
    from gpucon.hub import Hub
    from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
    from gpucon.sim.source import SimSource

    hub = Hub(
        [SimSource.for_demo(7, None, size)],
        refresh_s=1.0,
        slo_p95_ms_by_model=DEMO_SLO_P95_MS,
        rate_window=DEMO_RATE_WINDOW,
    )
    got: list[Snapshot] = []
    hub.subscribe(got.append)
    hub.start(lambda _: None)
    time.sleep(seconds)
    hub.stop()
    return got


def recorder_cpu(snapshots: list[Snapshot], keyframe_every: int) -> dict[str, float]:
    """The recorder thread's work per frame over ``snapshots``: frame, compress (CPU ms).
    ``delta``: the median delta; ``keyframe``: the mean keyframe; ``per_s``: the mean over
    a keyframe interval at one frame a second."""
    writer = FrameWriter()
    blobs = BlobWriter()
    columns = ColumnWriter()
    deltas: list[float] = []
    keys: list[float] = []
    for i, snapshot in enumerate(snapshots):
        key = i % keyframe_every == 0
        began = time.thread_time()
        frame_blobs(writer, blobs, columns, snapshot, key)
        took = (time.thread_time() - began) * 1000.0
        if i:  # the first keyframe encodes every nested value for the first time
            (keys if key else deltas).append(took)
    if not keys:  # one more keyframe, of the last snapshot, for its cost
        began = time.thread_time()
        frame_blobs(writer, blobs, columns, snapshots[-1], True)
        keys.append((time.thread_time() - began) * 1000.0)
    delta = statistics.median(deltas)
    keyframe = statistics.mean(keys)
    per_s = (statistics.mean(deltas) * (keyframe_every - 1) + keyframe) / keyframe_every
    return {"delta": delta, "delta_max": max(deltas), "keyframe": keyframe, "per_s": per_s}


_LIVE_SCRIPT = """
import json, os, sys, tempfile, time
from pathlib import Path
from gpucon.hub import Hub
from gpucon.recording.recorder import Recorder
from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
from gpucon.sim.source import SimSource

def cpu(tid):
    with open(f"/proc/self/task/{tid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

size, warm_s, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
with tempfile.TemporaryDirectory() as name:
    hub = Hub([SimSource.for_demo(7, None, size)], refresh_s=1.0,
              slo_p95_ms_by_model=DEMO_SLO_P95_MS, rate_window=DEMO_RATE_WINDOW)
    # the hub's findings of what changed, where this tree's hub keeps its own
    kw = {"moves": hub.moves} if hasattr(hub, "moves") else {}
    recorder = Recorder(Path(name) / "live.sqlite", fleet="demo", refresh_s=1.0, **kw)
    hub.subscribe(recorder)
    hub.start(lambda _: None)
    time.sleep(warm_s)
    tid = recorder._thread.native_id
    frames, before, began = recorder.frames_written, cpu(tid), time.monotonic()
    time.sleep(seconds)
    after, took, frames = cpu(tid), time.monotonic() - began, recorder.frames_written - frames
    hub.stop()
    recorder.close()
print(json.dumps({"ms_per_s": (after - before) * 1000.0 / took, "frames": frames}))
"""


def recorder_thread_ms(tree: Path, size: int, warm_s: float, seconds: float) -> float:
    """The recorder thread's CPU (from /proc: what the console pays, the hub's thread and
    the simulator beside it) per second of a live ``size``-GPU demo hub recording in real
    time, with ``tree``'s gpucon, in a child process; the window holds a keyframe when it
    is longer than ``KEYFRAME_S``."""
    env = dict(os.environ, PYTHONPATH=_path(str(tree)))
    argv = [sys.executable, "-P", "-c", _LIVE_SCRIPT, str(size), str(warm_s), str(seconds)]
    out = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, check=True)
    found: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return found["ms_per_s"]


# the 512-GPU fleet's first GPU: on screen once the first frame with data is drawn
MARKER_512 = b"gpu-000/gpu0"


def console_cpu(
    seconds: float,
    rounds: int,
    tmp: Path,
    base: Path | None,
    *,
    together: bool = True,
    probe: str | None = None,
) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    """CPU-s per minute, from the first data frame to ``seconds`` + 30 s after start, of
    ``gpucon demo --size 512`` without ``--record``, with it, and with the ``base``
    checkout's ``--record``, ``rounds`` times: each round's kinds side by side (``together``:
    they see the same moments of the host; ~3 % of a core each) or in turn. ``probe``: a
    ``sitecustomize`` the children load (``recording_threads``: each thread's CPU, written
    where ``GPUCON_THREAD_PROBE`` says), whose findings come back per kind and thread."""
    from benchmarks.pty_run import run_in_pty
    from benchmarks.startup_cpu import child_env

    # -P: the working directory is not put first on sys.path (PYTHONPATH picks the tree)
    argv = [sys.executable, "-P", "-m", "gpucon.commands.cli", "demo", "--size", "512"]
    site = tmp / "site"
    if probe is not None:
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(probe)
    trees = [("plain", ROOT), ("record", ROOT)]
    if base is not None:
        trees.append(("base", base.resolve()))
    kinds: list[tuple[str, dict[str, str]]] = []
    for kind, tree in trees:
        env = child_env(str(tmp / f"pyc-{kind}"))
        env["PYTHONPATH"] = _path(f"{tree}:{site}" if probe is not None else tree)
        env["GPUCON_THREAD_PROBE"] = str(tmp / f"probe-{kind}.json")
        env["GPUCON_THREAD_FROM"] = "20"
        env["GPUCON_THREAD_SPAN"] = str(max(5.0, seconds - 5.0))
        kinds.append((kind, env))
    for _, env in kinds:  # bytecode compiled once, before anything is measured
        run_in_pty(argv, marker=MARKER_512, duration_s=60, stop_at_marker=True, env=env)

    def one(i: int, kind: str, env: dict[str, str]) -> tuple[float, dict[str, float]]:
        record = [] if kind == "plain" else ["--record", f"{tmp}/{kind}{i}.sqlite"]
        run = run_in_pty([*argv, *record], marker=MARKER_512, duration_s=seconds + 30, env=env)
        if run.marker_s is None:
            raise SystemExit(f"{kind}: no data frame seen")
        per_min = (run.cpu_s - run.cpu_at_marker_s) / (run.wall_s - run.marker_s) * 60.0
        found = Path(env["GPUCON_THREAD_PROBE"])
        threads = json.loads(found.read_text()) if found.exists() else {}
        found.unlink(missing_ok=True)
        return per_min, threads

    out: dict[str, list[float]] = {kind: [] for kind, _ in kinds}
    per_thread: dict[str, dict[str, list[float]]] = {kind: {} for kind, _ in kinds}
    for i in range(rounds):
        if together:
            with ThreadPoolExecutor(len(kinds)) as pool:
                futures = [pool.submit(one, i, kind, env) for kind, env in kinds]
                results = [f.result() for f in futures]
        else:
            results = [one(i, kind, env) for kind, env in kinds]
        for (kind, _), (per_min, threads) in zip(kinds, results, strict=True):
            out[kind].append(per_min)
            for n, v in threads.items():
                per_thread[kind].setdefault(n, []).append(v)
            shown = ", ".join(f"{n} {v:.1f}" for n, v in sorted(threads.items()) if v >= 0.3)
            print(f"  {kind}: {per_min:.2f} CPU-s/min ({shown} ms/s)", flush=True)
    return out, per_thread


def pooled_pct(runs: dict[str, list[float]], kind: str) -> float:
    """What ``kind`` adds to the plain runs' CPU, pooled: all its CPU over all theirs (the
    rounds weighed by their CPU; the medians of each kind flatter a cost that varies round to
    round, by ±3 points between runs of the same code on this VM)."""
    return 100.0 * (sum(runs[kind]) / sum(runs["plain"]) - 1.0)


def hour_of_512(tmp: Path, minutes: float) -> Path:
    """A 1-hour 512-GPU recording: ``minutes`` recorded, then repeated to fill the hour."""
    path = tmp / "hour-512.sqlite"
    seconds = minutes * 60.0
    record_simulated(path, seconds=seconds, demo=DemoOptions(7, None, 512))
    db = sqlite3.connect(path)
    copies = int(3600.0 // seconds)
    with db:
        for k in range(1, copies):
            db.execute(
                "INSERT INTO frames (t, kind, blob, samples) SELECT t + ?, kind, blob, samples "
                "FROM frames WHERE t < ? ORDER BY id",
                (k * seconds, 1_790_000_000.0 + seconds),
            )
    db.execute("VACUUM")
    db.close()
    return path


def seek_ms(path: Path, count: int) -> dict[str, list[float]]:
    """Per random time: CPU ms to the snapshot there (what the screen shows first) and to
    its full 120 ticks of history after it (this thread's CPU time: on a shared machine it
    is what an idle one would take)."""
    store = RecordingStore(path, readonly=True)
    span = store.span()
    assert span is not None
    rng = random.Random(7)
    cursor = ReplayCursor(store)
    out: dict[str, list[float]] = {"cpu": [], "fill_cpu": []}
    for _ in range(count):
        at = rng.uniform(span[0], span[1])
        cpu = time.thread_time()
        snapshot = cursor.seek(at)
        out["cpu"].append((time.thread_time() - cpu) * 1000.0)
        assert snapshot is not None and len(snapshot.gpus) == 512
        cpu = time.thread_time()
        snapshot = cursor.fill_history()
        out["fill_cpu"].append((time.thread_time() - cpu) * 1000.0)
        assert snapshot is not None and len(snapshot.history.times) == 120
    store.close()
    return out


def alerts_only_ms(path: Path, minutes: float) -> tuple[float, int]:
    """CPU ms per frame of ``--alerts-only``'s re-run over the first ``minutes``."""
    from gpucon.model.alerts import AlertThresholds
    from gpucon.recording.rerun import rerun_alerts

    store = RecordingStore(path, readonly=True)
    span = store.span()
    assert span is not None
    began = time.process_time()
    result = rerun_alerts(store, AlertThresholds(), until=span[0] + minutes * 60.0)
    took = time.process_time() - began
    store.close()
    return took * 1000.0 / result.frames, result.frames


_BASE_SCRIPT = """
import json, statistics, sys, tempfile, time
from pathlib import Path
from benchmarks.recording import hour_of_512, seek_ms
from gpucon.model.alerts import AlertThresholds
from gpucon.recording.rerun import rerun_alerts
from gpucon.recording.store import RecordingStore
from gpucon.session import DemoOptions
from gpucon.session.record import record_simulated
minutes, count, rerun_s = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
with tempfile.TemporaryDirectory() as name:
    took = seek_ms(hour_of_512(Path(name), minutes), count)
    short = Path(name) / "short.sqlite"
    record_simulated(short, seconds=rerun_s, demo=DemoOptions(7, None, 512))
    store = RecordingStore(short, readonly=True)
    began = time.process_time()
    result = rerun_alerts(store, AlertThresholds())
    per_frame = (time.process_time() - began) * 1000.0 / result.frames
print(json.dumps({"cpu": took["cpu"], "fill_cpu": took["fill_cpu"], "rerun": per_frame}))
"""


def base_seek(base: Path, minutes: float, count: int, rerun_s: float) -> dict[str, Any]:
    """The ``base`` checkout's seek (its own file format, made the same way) and its
    ``--alerts-only`` per frame over ``rerun_s`` seconds recorded, in a child process."""
    env = dict(os.environ, PYTHONPATH=_path(str(base)))
    argv = [sys.executable, "-P", "-c", _BASE_SCRIPT, str(minutes), str(count), str(rerun_s)]
    out = subprocess.run(argv, env=env, cwd=base, capture_output=True, text=True, check=True)
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def spread(values: list[float], unit: str = "", digits: int = 0) -> str:
    """min/median/max."""
    three = (min(values), statistics.median(values), max(values))
    return "/".join(f"{v:.{digits}f}" for v in three) + unit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter runs (rougher figures)")
    parser.add_argument("--base", type=Path, default=None, help="another checkout's --record")
    args = parser.parse_args()
    quick = args.quick
    lines = [HEADING, ""]
    with tempfile.TemporaryDirectory(prefix="gpucon-rec-bench-") as name:
        tmp = Path(name)
        demo_s = 60.0 if quick else 300.0
        demo_mb, demo_wall = size_per_hour(None, demo_s, tmp)
        big_s = 60.0 if quick else 180.0
        big_mb, big_wall = size_per_hour(512, big_s, tmp)
        lines.append(
            f"- File size per hour (SQLite, zstd: the fleet as MessagePack, the history "
            f"samples as columns; a keyframe every {KEYFRAME_S:.0f} s; "
            f"{demo_s:.0f} s and {big_s:.0f} s of simulated fleet recorded, scaled to an hour): "
            f"default demo {demo_mb:.2f} MB/h (goal <= {GOAL_DEMO_MB_H:g}), --size 512 "
            f"{big_mb:.0f} MB/h (goal <= {GOAL_512_MB_H:g})."
        )
        print(lines[-1], flush=True)
        live_s = 20.0 if quick else 60.0
        cost = recorder_cpu(live_snapshots(512, live_s), round(KEYFRAME_S))
        lines.append(
            f"- The recorder thread at 512 GPUs, over {live_s:.0f} s of a demo hub ticking in "
            f"real time (~2,000 entities and ~4,000 history samples change a tick): "
            f"{cost['delta']:.1f} ms of CPU a delta (median; max {cost['delta_max']:.0f}), "
            f"{cost['keyframe']:.0f} ms a keyframe (one every {KEYFRAME_S:.0f} s): "
            f"{cost['per_s']:.1f} ms a "
            "second, in process."
        )
        print(lines[-1], flush=True)
        thread_s = 30.0 if quick else 65.0
        trees = [("this", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
        thread_ms: dict[str, list[float]] = {name: [] for name, _ in trees}
        for _ in range(1 if quick else 2):
            for name, tree in trees:
                thread_ms[name].append(recorder_thread_ms(tree, 512, 8.0, thread_s))
        text = (
            f"- The recorder thread's CPU beside a live 512-GPU demo hub recording in real time "
            f"({thread_s:.0f} s windows, from /proc: the snapshots as the hub makes them, its "
            f"thread running beside; {len(thread_ms['this'])} runs, min/median/max): "
            f"{spread(thread_ms['this'], ' ms', 1)} a second"
        )
        if "base" in thread_ms:
            text += f"; the checkout before these changes: {spread(thread_ms['base'], ' ms', 1)}"
        lines.append(text + ".")
        print(lines[-1], flush=True)
        # the steady state: the console's 120 ticks of history fill in its first two minutes,
        # and the window holds keyframes as they come
        cpu_s = 30.0 if quick else 150.0
        rounds = 1 if quick else 4
        runs, _ = console_cpu(cpu_s, rounds, tmp, args.base)
        plain = statistics.median(runs["plain"])

        def added(kind: str) -> str:
            ratios = [k / p for k, p in zip(runs[kind], runs["plain"], strict=True)]
            by_median = 100.0 * (statistics.median(runs[kind]) / plain - 1.0)
            return (
                f"{spread(runs[kind], digits=2)} with `--record`: **{pooled_pct(runs, kind):+.1f} "
                f"%** pooled (all its CPU over all the plain runs'), {by_median:+.1f} % by "
                f"medians, round by round {spread(ratios, digits=3)}"
            )

        text = (
            f"- `gpucon demo --size 512` CPU, plain and `--record` side by side each round, "
            f"{rounds} rounds, from the first data frame to {cpu_s + 30:.0f} s after start "
            f"(CPU-s/min min/median/max): {spread(runs['plain'], digits=2)} without "
            f"recording, {added('record')} (goal <= {GOAL_CPU_PCT:g} %)"
        )
        if "base" in runs:
            text += f"; the checkout before these changes, in the same rounds: {added('base')}"
        lines.append(text + ".")
        print(lines[-1], flush=True)
        minutes = 1.0 if quick else 5.0
        began = time.perf_counter()
        hour = hour_of_512(tmp, minutes)
        made = time.perf_counter() - began
        size_mb = hour.stat().st_size / 1e6
        took = seek_ms(hour, 10 if quick else 30)
        lines.append(
            f"- Seek in a 1-hour 512-GPU recording ({size_mb:.0f} MB; {minutes:g} min through "
            f"the simulator, repeated to the hour, made in {made:.0f} s), {len(took['cpu'])} "
            f"random times: the snapshot there in {spread(took['cpu'], ' ms')} of CPU "
            f"(min/median/max; goal < {GOAL_SEEK_MS:g} ms); its plots' 120 ticks of history "
            f"(~22,000 series) follow in {spread(took['fill_cpu'], ' ms')} more."
        )
        print(lines[-1], flush=True)
        rerun_min = 1.0 if quick else 3.0
        per_frame, frames = alerts_only_ms(hour, rerun_min)
        lines.append(
            f"- `gpucon replay FILE --alerts-only` on that file: {per_frame:.0f} ms of CPU a "
            f"frame over its first {frames} frames (the alert rules, as the hub runs them, "
            f"and each frame's changed rows decoded), {per_frame * 3.6:.0f} s for the hour."
        )
        print(lines[-1], flush=True)
        if args.base is not None:
            base_run = base_seek(args.base.resolve(), minutes, len(took["cpu"]), rerun_min * 60)
            lines.append(
                f"- The checkout before these changes, made and measured the same way in this "
                f"run: seek {spread(base_run['cpu'], ' ms')} of CPU, plots "
                f"{spread(base_run.get('fill_cpu', [0.0]), ' ms')} more; `--alerts-only` "
                f"{base_run['rerun']:.0f} ms a frame ({rerun_min * 60:.0f} s recorded)."
            )
            print(lines[-1], flush=True)
    load = os.getloadavg()[1]
    lines.append(
        f"- Machine: {sys.platform}, {os.cpu_count()} CPUs shared with other work while "
        f"measured (load average {load:.1f} over 5 min at the end); the simulator "
        f"recorded the default demo's {demo_s:.0f} s in {demo_wall:.1f} s and 512 GPUs' "
        f"{big_s:.0f} s in {big_wall:.0f} s."
    )
    write_section(HEADING, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
