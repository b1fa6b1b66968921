"""gpucon (live, NVML source only, 1 s refresh) against nvitop (1 s interval) on a real GPU.

Run on the GPU machine (device tool), with textual and nvitop importable:
``python -m benchmarks.nvml_console_vs_nvitop OUT.json [--seconds 60]``.
Both run at the same time, each in its own 180×50 pseudo-terminal (benchmarks/pty_run.py),
while a CUDA load keeps the GPU busy so that values change every tick. Counted from the first
frame that shows the GPU ("H200"/"NVIDIA") to the end: CPU seconds per minute (user+sys),
peak RSS and bytes per second written to the terminal.
"""

from __future__ import annotations

import argparse
import json
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
        "measured_s": round(span, 1),
        "cpu_s_per_min": round((run.cpu_s - run.cpu_at_marker_s) / span * 60, 3),
        "peak_rss_mib": round(run.peak_rss_mib, 1),
        "terminal_bytes_per_s": round((run.bytes_written - run.bytes_at_marker) / span, 1),
        # the same, from 5 s after the first frame: start-up repaints left out
        "terminal_bytes_per_s_steady": round(run.bytes_per_s_after(run.marker_s + 5.0), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--marker", default="H200")
    options = parser.parse_args()
    config = Path(tempfile.mkdtemp()) / "config.toml"
    config.write_text(CONFIG)
    commands = {
        "gpucon": [PY, "-m", "gpucon.commands.cli", "live", "--config", str(config), "--read-only"],
        "nvitop": [PY, "-m", "nvitop", "--interval", "1"],
    }
    load = subprocess.Popen(
        [PY, str(ROOT / "tests" / "device" / "cuda_load.py"), str(options.seconds + 30)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert load.stdout is not None
    load_state = load.stdout.readline().strip()
    results: dict[str, PtyResult] = {}

    def measure(name: str) -> None:
        results[name] = run_in_pty(
            commands[name], marker=options.marker.encode(), duration_s=options.seconds + 10
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
