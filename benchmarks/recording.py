"""Recording: file size per hour, the console's CPU with and without ``--record``, seek time.

Run: ``.venv/bin/python -m benchmarks.recording [--quick]``. Writes its section of
benchmarks/RESULTS.md.

- size per hour: the simulated fleet recorded faster than real time (one tick per simulated
  second, keyframe every 15 s as by default), the file's bytes after close, scaled to an hour;
  at the default demo and at ``--size 512``.
- CPU: ``gpucon demo --size 512`` in a pty for a while, with and without ``--record``, CPU-s
  per minute after the first data frame (runs alternate, medians), and the recorder thread's
  own CPU per frame measured in process.
- seek: a 1-hour 512-GPU recording (the first minutes recorded through the simulator, then
  repeated, keyframe groups with shifted times, to fill the hour: seeking reads one keyframe,
  at most a minute of deltas and the 120 ticks of history, whatever the file holds), then
  ``ReplayCursor.seek`` to random times: wall time until the snapshot there (what the
  screen shows first), then ``fill_history`` (the plots' 120 ticks, shown next).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results_file import write_section
from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.frames import split_samples
from gpucon.recording.recorder import DELTA_LEVEL, KEYFRAME_LEVEL
from gpucon.recording.store import RecordingStore, encode_frame
from gpucon.recording.writer import FrameWriter
from gpucon.session import DemoOptions
from gpucon.session.record import record_simulated

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


def recorder_cpu_ms(size: int, ticks: int) -> float:
    """The writer thread's CPU per frame at ``size`` GPUs: frame + compress, keyframes
    included (in process; the mean over a multiple of 15 frames)."""
    from gpucon.hub import Hub
    from gpucon.session.record import FrozenClock
    from gpucon.sim import DEMO_SLO_P95_MS
    from gpucon.sim.source import SimSource

    clock = FrozenClock(1_790_000_000.0)
    hub = Hub(
        [SimSource.for_demo(7, None, size, clock=clock)],
        clock=clock,
        slo_p95_ms_by_model=DEMO_SLO_P95_MS,
    )
    writer = FrameWriter()
    costs = []
    for i in range(ticks + 1):
        hub.poll_once()
        snapshot = hub.tick()
        clock.now += 1.0
        began = time.thread_time()
        key = i % 15 == 0  # a keyframe every 15 s, as by default
        frame = writer.keyframe(snapshot) if key else writer.delta(snapshot)
        fleet, samples = split_samples(frame)
        level = KEYFRAME_LEVEL if key else DELTA_LEVEL
        encode_frame(fleet, level)
        encode_frame(samples, level)
        if i:
            costs.append(time.thread_time() - began)
    return statistics.mean(costs) * 1000.0


# the 512-GPU fleet's first GPU: on screen once the first frame with data is drawn
MARKER_512 = b"gpu-000/gpu0"


def _cpu_per_min(argv: list[str], seconds: float, env: dict[str, str]) -> float:
    """CPU-s per minute of ``argv`` in a pty, counted from its first data frame."""
    from benchmarks.pty_run import run_in_pty

    run = run_in_pty(argv, marker=MARKER_512, duration_s=seconds + 30, env=env)
    if run.marker_s is None:
        raise SystemExit(f"{argv}: no data frame seen")
    return (run.cpu_s - run.cpu_at_marker_s) / (run.wall_s - run.marker_s) * 60.0


def console_cpu(seconds: float, pairs: int, tmp: Path) -> tuple[float, float]:
    """CPU-s per minute of ``gpucon demo --size 512`` without and with ``--record``
    (alternating runs; medians)."""
    from benchmarks.pty_run import run_in_pty
    from benchmarks.startup_cpu import GPUCON, child_env

    env = child_env(str(tmp / "pyc"))
    plain_argv = [*GPUCON, "demo", "--size", "512"]
    # bytecode compiled once, before anything is measured
    run_in_pty(plain_argv, marker=MARKER_512, duration_s=60, stop_at_marker=True, env=env)
    plain: list[float] = []
    recording: list[float] = []
    for i in range(pairs):
        plain.append(_cpu_per_min(plain_argv, seconds, env))
        path = tmp / f"cpu-{i}.sqlite"
        recording.append(_cpu_per_min([*plain_argv, "--record", str(path)], seconds, env))
    return statistics.median(plain), statistics.median(recording)


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
                "INSERT INTO frames (t, kind, blob) SELECT t + ?, kind, blob FROM frames "
                "WHERE t < ? ORDER BY id",
                (k * seconds, 1_790_000_000.0 + seconds),
            )
    db.execute("VACUUM")
    db.close()
    return path


def seek_ms(path: Path, count: int) -> dict[str, list[float]]:
    """Per random time: ms to the snapshot there (what the screen shows first) and to its
    full 120 ticks of history after it, in wall time and in this thread's CPU time (on a
    shared machine the CPU time is what an idle one would take)."""
    store = RecordingStore(path, readonly=True)
    span = store.span()
    assert span is not None
    rng = random.Random(7)
    cursor = ReplayCursor(store)
    out: dict[str, list[float]] = {"wall": [], "cpu": [], "fill_wall": [], "fill_cpu": []}
    for _ in range(count):
        at = rng.uniform(span[0], span[1])
        wall, cpu = time.perf_counter(), time.thread_time()
        snapshot = cursor.seek(at)
        out["wall"].append((time.perf_counter() - wall) * 1000.0)
        out["cpu"].append((time.thread_time() - cpu) * 1000.0)
        assert snapshot is not None and len(snapshot.gpus) == 512
        wall, cpu = time.perf_counter(), time.thread_time()
        snapshot = cursor.fill_history()
        out["fill_wall"].append((time.perf_counter() - wall) * 1000.0)
        out["fill_cpu"].append((time.thread_time() - cpu) * 1000.0)
        assert snapshot is not None and len(snapshot.history.times) == 120
    store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter runs (rougher figures)")
    args = parser.parse_args()
    quick = args.quick
    lines = [HEADING, ""]
    with tempfile.TemporaryDirectory(prefix="gpucon-rec-bench-") as name:
        tmp = Path(name)
        demo_s, demo_wall = 60.0 if quick else 300.0, 0.0
        demo_mb, demo_wall = size_per_hour(None, demo_s, tmp)
        big_s = 60.0 if quick else 180.0
        big_mb, big_wall = size_per_hour(512, big_s, tmp)
        frame_ms = recorder_cpu_ms(512, 15 if quick else 30)
        lines.append(
            f"- File size per hour (SQLite, zlib JSON frames, keyframe every 15 s; "
            f"{demo_s:.0f} s and {big_s:.0f} s of simulated fleet recorded, scaled to an hour): "
            f"default demo {demo_mb:.2f} MB/h (goal <= {GOAL_DEMO_MB_H:g}), --size 512 "
            f"{big_mb:.0f} MB/h (goal <= {GOAL_512_MB_H:g})."
        )
        lines.append(
            f"- The recorder thread's CPU at 512 GPUs: {frame_ms:.0f} ms per frame (keyframes "
            f"included; mean, in process), {frame_ms / 10:.1f} % of one core at one frame "
            "a second."
        )
        print(lines[-2], lines[-1], sep="\n", flush=True)
        cpu_s = 20.0 if quick else 45.0
        plain, recording = console_cpu(cpu_s, 1 if quick else 2, tmp)
        overhead = 100.0 * (recording - plain) / plain
        lines.append(
            f"- `gpucon demo --size 512` CPU, {cpu_s:.0f} s runs in a pty after the first "
            f"frame (medians): {plain:.2f} CPU-s/min without recording, {recording:.2f} with "
            f"`--record`: +{overhead:.1f} % (goal <= {GOAL_CPU_PCT:g} %)."
        )
        print(lines[-1], flush=True)
        minutes = 1.0 if quick else 5.0
        began = time.perf_counter()
        hour = hour_of_512(tmp, minutes)
        made = time.perf_counter() - began
        size_mb = hour.stat().st_size / 1e6
        took = seek_ms(hour, 10 if quick else 30)
        med = {k: statistics.median(v) for k, v in took.items()}
        lines.append(
            f"- Seek in a 1-hour 512-GPU recording ({size_mb:.0f} MB; {minutes:g} min through "
            f"the simulator, repeated to the hour, made in {made:.0f} s), {len(took['cpu'])} "
            f"random times: the snapshot there in median {med['cpu']:.0f} ms of CPU, max "
            f"{max(took['cpu']):.0f} ms ({med['wall']:.0f} ms wall on this shared machine; goal "
            f"< {GOAL_SEEK_MS:g} ms); its plots' 120 ticks of history (~22,000 series) follow "
            f"in median {med['fill_cpu']:.0f} ms of CPU more ({med['fill_wall']:.0f} ms wall)."
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
