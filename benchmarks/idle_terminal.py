"""Terminal bytes a live console writes once it is up, without a GPU: ``gpucon live`` (NVML
source only, 1 s refresh, read-only) over the recorded H200 (tests/helpers/nvml_replay.py),
each run in its own 180×50 pseudo-terminal (benchmarks/pty_run.py).

``python -m benchmarks.idle_terminal [--seconds 30] [--repeat 3] [--base DIR]``

Two fleets: ``steady`` (the recording's answers, which repeat their last value: nothing
changes after the first reads) and ``changing`` (the GPU's power and temperature move on every
read, as under a CUDA load). Terminal bytes per second from 5 s after the first frame showing
"H200" to the end (start-up repaints left out, as ``nvml_console_vs_nvitop`` counts them), and
from 20 s (the TREND sparkline full, the recording's first changing reads over: settled). With
``--base``, that checkout's console runs at the same time as this one's, in each round, so
both see the same machine; min/median/max over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from benchmarks.nvml_console_vs_nvitop import CONFIG  # the same NVML-only read-only console
from benchmarks.pty_run import PtyResult, run_in_pty

ROOT = Path(__file__).resolve().parents[1]

# the console, its NVML source answered by the recording (``changing``: power and temperature
# moving on every read); run with the checkout measured first on the path
CHILD = """\
import itertools, sys
import gpucon.sources.nvml as nvml_source
from tests.helpers.nvml_replay import ReplayNvml

def recorded():
    nvml = ReplayNvml("h200.json")
    if sys.argv[1] == "changing":
        power, temp = itertools.count(), itertools.count()
        nvml.override("nvmlDeviceGetPowerUsage", lambda h: 600_000 + 7_000 * (next(power) % 13))
        nvml.override("nvmlDeviceGetTemperature", lambda h, s: 50 + next(temp) % 9)
    return nvml

built = nvml_source.NvmlSource.__init__
def with_recording(self, *args, **kwargs):
    kwargs["nvml"] = recorded()
    built(self, *args, **kwargs)
nvml_source.NvmlSource.__init__ = with_recording
from gpucon.commands.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run(checkout: Path, fleet: str, config: Path, seconds: float) -> PtyResult:
    state = tempfile.mkdtemp(prefix="gpucon-state-")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": state,
        "XDG_STATE_HOME": state,
        # the checkout measured first; this one's tests.helpers (the recording) after it
        "PYTHONPATH": f"{checkout}:{ROOT}",
    }
    argv = [sys.executable, "-c", CHILD, fleet, "live", "--config", str(config), "--read-only"]
    return run_in_pty(argv, marker=b"H200", duration_s=seconds, env=env, cwd=str(checkout))


def run_together(
    checkouts: dict[str, Path], fleet: str, config: Path, seconds: float
) -> dict[str, PtyResult]:
    """Each checkout's console at the same time, each in its own pty."""
    results: dict[str, PtyResult] = {}

    def measure(name: str, checkout: Path) -> None:
        results[name] = run(checkout, fleet, config, seconds)

    threads = [threading.Thread(target=measure, args=item) for item in checkouts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


WINDOWS_S = (5.0, 20.0)  # counted from this long after the first frame


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--base", type=Path, default=None, help="another checkout (before)")
    options = parser.parse_args()
    config = Path(tempfile.mkdtemp()) / "config.toml"
    config.write_text(CONFIG)
    checkouts = {"this": ROOT}
    if options.base is not None:
        checkouts["base"] = options.base.resolve()
    figures: dict[tuple[str, float, str], list[float]] = {}
    for round_ in range(options.repeat):
        for fleet in ("steady", "changing"):
            results = run_together(checkouts, fleet, config, options.seconds)
            for name, result in results.items():
                if result.marker_s is None:
                    print(f"round {round_} {fleet} {name}: no first frame", flush=True)
                    continue
                for after in WINDOWS_S:
                    rate = result.bytes_per_s_after(result.marker_s + after)
                    figures.setdefault((fleet, after, name), []).append(rate)
                    print(
                        f"round {round_} {fleet:8} {name:4} from {after:.0f} s: {rate:.1f} B/s",
                        flush=True,
                    )
    print("\nfleet     from   checkout  terminal bytes/s (min / median / max)")
    for (fleet, after, name), rates in sorted(figures.items()):
        low, mid, high = min(rates), statistics.median(rates), max(rates)
        print(
            f"{fleet:9} {after:4.0f} s {name:9} {low:.1f} / {mid:.1f} / {high:.1f} (n={len(rates)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
