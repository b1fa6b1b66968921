"""gpucon (live, NVML source only, 1 s refresh) against nvitop (1 s interval) on a real GPU.

Run on the GPU machine (device tool), with textual and nvitop importable:
``python -m benchmarks.nvml_console_vs_nvitop OUT.json [--seconds 60] [--starts 9]
[--base DIR]``. A CUDA load keeps the GPU busy throughout, so that values change every tick.

1. First frame: each program started alone ``--starts`` times, interleaved (gpucon, the
   ``--base`` checkout's gpucon when given, nvitop), each in its own 180×50 pseudo-terminal
   (benchmarks/pty_run.py) until its first frame shows the GPU's model ("H200"): wall seconds and
   CPU seconds (user+sys, from process start) to it, min/median/max, and each gpucon's ratio to
   nvitop round by round (a start against nvitop's start of the same round), min/median/max.
   Bytecode is cached for all (after one uncounted start of each), as for installed packages.
2. Running: gpucon and nvitop at the same time for ``--seconds``: CPU seconds per minute from
   process start (start-up included) and, beside it, from the first frame on (steady); peak
   RSS; bytes per second written to the terminal.
3. NVML's own start in a fresh process: ``nvmlInit`` and gpucon's first ``NvmlSource.read``,
   the floor under any console's first frame with data.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.pty_run import PtyResult, run_in_pty

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CONFIG = """\
fleet = "local"
read_only = true

[ui]
refresh_s = 1.0

[fleets.local.nvml]
host = ""
cadence_s = 1.0
slow_cadence_s = 10.0
timeout_s = 2.0
"""


def steady(run: PtyResult) -> dict[str, Any]:
    if run.marker_s is None:
        return {"error": "marker never shown", "bytes": run.bytes_written, "cpu_s": run.cpu_s}
    span = run.wall_s - run.marker_s
    return {
        "first_frame_s": round(run.marker_s, 2),
        "cpu_s_to_first_frame": round(run.cpu_at_marker_s, 3),
        "measured_s": round(span, 1),
        # from process start: what a user's machine pays for a console it opens and watches
        "cpu_s_per_min_from_start": round(run.cpu_s / run.wall_s * 60, 3),
        "cpu_s_per_min": round((run.cpu_s - run.cpu_at_marker_s) / span * 60, 3),
        "peak_rss_mib": round(run.peak_rss_mib, 1),
        "terminal_bytes_per_s": round((run.bytes_written - run.bytes_at_marker) / span, 1),
        # the same, from 5 s after the first frame: start-up repaints left out
        "terminal_bytes_per_s_steady": round(run.bytes_per_s_after(run.marker_s + 5.0), 1),
    }


def spread(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


# Python's bytecode cache, on for every program as for an installed package (pip compiles a
# wheel's modules when it installs them): the device image sets PYTHONDONTWRITEBYTECODE and the
# wheels are carried uncompiled, so without this every start compiled Textual, gpucon, nvitop
# and pynvml from source again (0.75 s of gpucon's 0.96 s to its first frame, 2026-12-01)
BYTECODE_CACHE = tempfile.mkdtemp(prefix="gpucon-pyc-")


def env_for(checkout: Path) -> dict[str, str]:
    """The environment a program started in ``checkout`` gets: that checkout first on the
    path (then the carried wheels, as ``run_on_device.sh`` set them), bytecode cached."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != "."]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(checkout), *rest]), PYTHONPYCACHEPREFIX=BYTECODE_CACHE
    )
    return env


def first_frames(
    commands: dict[str, tuple[list[str], Path]], marker: bytes, starts: int
) -> dict[str, Any]:
    """Each program started alone ``starts`` times, interleaved (the order turning by one
    each round): wall and CPU seconds (from process start) to its first frame showing
    ``marker``, min/median/max; and each program's ratio to the last one's (nvitop) round
    by round, min/median/max: steadier than the ratio of the medians on a busy machine."""
    names = list(commands)
    wall: dict[str, list[float | None]] = {name: [] for name in names}
    cpu: dict[str, list[float | None]] = {name: [] for name in names}
    for round_ in range(starts + 1):  # round 0 warms the bytecode caches: not counted
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            argv, cwd = commands[name]
            run = run_in_pty(
                argv,
                marker=marker,
                duration_s=15,
                stop_at_marker=True,
                env=env_for(cwd),
                cwd=str(cwd),
            )
            if round_ == 0:
                continue
            wall[name].append(run.marker_s)
            cpu[name].append(None if run.marker_s is None else run.cpu_at_marker_s)
    reference = names[-1]

    def per_round(of: dict[str, list[float | None]], name: str) -> dict[str, float] | None:
        each = [a / b for a, b in zip(of[name], of[reference], strict=True) if a and b]
        return spread(each) if each else None

    result: dict[str, Any] = {}
    for name in names:
        walls = [w for w in wall[name] if w is not None]
        cpus = [c for c in cpu[name] if c is not None]
        result[name] = {
            "wall_s": spread(walls) if walls else None,
            "cpu_s": spread(cpus) if cpus else None,
            "starts": len(walls),
            "missed": starts - len(walls),
        }
        if name != reference:
            result[name][f"wall_per_round_vs_{reference}"] = per_round(wall, name)
            result[name][f"cpu_per_round_vs_{reference}"] = per_round(cpu, name)
    return result


NVML_START = """\
import json, time
t0 = time.perf_counter()
import pynvml
t1 = time.perf_counter()
pynvml.nvmlInit()
t2 = time.perf_counter()
pynvml.nvmlShutdown()
from gpucon.sources.nvml import NvmlSource
t3 = time.perf_counter()
reading = NvmlSource(timeout_s=5.0).read()
t4 = time.perf_counter()
print(json.dumps({"import_pynvml_s": t1 - t0, "nvml_init_s": t2 - t1,
    "first_read_s (init included)": t4 - t3, "first_read_health": reading.health.value,
    "first_read_error": reading.error, "gpus": len(reading.gpus)}))
"""


def nvml_start() -> dict[str, Any]:
    """NVML's initialisation and gpucon's first read, in a fresh process."""
    done = subprocess.run(
        [PY, "-c", NVML_START], capture_output=True, text=True, timeout=60, env=env_for(ROOT)
    )
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def gpu_model() -> str:
    """The first GPU's model as both programs show it ("H200", "H100", "A100"): the word after
    "NVIDIA" in nvidia-smi's name; a card lent for the run is not always the one asked for."""
    name = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()[0]
    words = name.replace("NVIDIA", "").split()
    return words[0] if words else name


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--starts", type=int, default=9, help="first-frame starts per program")
    parser.add_argument("--base", type=Path, default=None, help="another checkout (before)")
    parser.add_argument(
        "--marker", default=None, help="text both show once up (default: the GPU's model)"
    )
    options = parser.parse_args()
    if options.marker is None:
        options.marker = gpu_model()
    config = Path(tempfile.mkdtemp()) / "config.toml"
    config.write_text(CONFIG)
    live = ["-m", "gpucon.commands.cli", "live", "--config", str(config), "--read-only"]
    commands = {
        "gpucon": [PY, *live],
        "nvitop": [PY, "-m", "nvitop", "--interval", "1"],
    }
    load = subprocess.Popen(
        [PY, str(ROOT / "tests" / "device" / "cuda_load.py"), str(options.seconds + 300)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert load.stdout is not None
    load_state = load.stdout.readline().strip()
    started: dict[str, tuple[list[str], Path]] = {"gpucon": (commands["gpucon"], ROOT)}
    if options.base is not None:
        started["gpucon (base)"] = ([PY, *live], options.base.resolve())
    started["nvitop"] = (commands["nvitop"], ROOT)
    frames = first_frames(started, options.marker.encode(), options.starts)
    print(json.dumps({"first_frame": frames}, indent=1), flush=True)
    nvml_start()  # once to fill the bytecode cache, then measured
    nvml = nvml_start()
    print(json.dumps({"nvml_start": nvml}, indent=1), flush=True)
    results: dict[str, PtyResult] = {}

    def measure(name: str) -> None:
        results[name] = run_in_pty(
            commands[name],
            marker=options.marker.encode(),
            duration_s=options.seconds + 10,
            env=env_for(ROOT),
            cwd=str(ROOT),
        )

    threads = [threading.Thread(target=measure, args=(name,)) for name in commands]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    load.kill()
    load.wait()
    doc = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu_load": load_state,
        "seconds": options.seconds,
        "commands": {name: " ".join(argv[1:]) for name, argv in commands.items()},
        "nvml_start": nvml,
        "first_frame": frames,
        "results": {name: steady(run) for name, run in results.items()},
        "raw": {
            name: {k: v for k, v in vars(run).items() if k != "writes"}
            for name, run in results.items()
        },
    }
    options.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["results"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
