"""Run every CPU-side benchmark in one go: ``.venv/bin/python -m benchmarks [--quick]``.

Each benchmark prints its own figures and ratios, all measured in this one run on this
machine. The GPU benchmarks (``nvml_bench``, ``nvml_console_vs_nvitop``) need an NVIDIA GPU:
they run on the device machine through ``tests/device/run_on_device.sh``.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time

BENCHMARKS: list[tuple[str, list[str], list[str]]] = [
    # (module, full arguments, --quick arguments)
    ("benchmarks.tick_cost", ["--ticks", "40"], ["--ticks", "15"]),
    ("benchmarks.tick_cost", ["--ticks", "40", "--churn"], ["--ticks", "15", "--churn"]),
    (
        "benchmarks.steady_state",
        ["--size", "512", "--size", "2048", "--minutes", "10", "--window", "5-10"],
        ["--size", "512", "--minutes", "2", "--window", "1-2"],
    ),
    (
        "benchmarks.steady_state",
        ["--churn", "--size", "512", "--minutes", "3", "--window", "1-3"],
        ["--churn", "--size", "512", "--minutes", "1.5", "--window", "0.5-1.5"],
    ),
    (
        "benchmarks.key_latency",
        ["--sizes", "8", "512", "2048", "--rounds", "3", "--repeat", "3"],
        ["--sizes", "8", "512", "--rounds", "1", "--warmup", "5"],
    ),
    (  # the same keys on a loaded machine: two busy loops beside the console
        "benchmarks.key_latency",
        ["--sizes", "2048", "--rounds", "3", "--repeat", "3", "--load", "2"],
        ["--sizes", "512", "--rounds", "1", "--warmup", "5", "--load", "2"],
    ),
    (
        "benchmarks.startup_cpu",
        ["--seconds", "60", "--repeat", "5"],
        ["--seconds", "15", "--repeat", "3"],
    ),
    (
        "benchmarks.idle_terminal",
        ["--seconds", "40", "--repeat", "3"],
        ["--seconds", "25", "--repeat", "1"],
    ),
    ("benchmarks.round_trips", ["--reads", "20"], ["--reads", "5"]),
    ("benchmarks.registry_server_time", ["--ticks", "50"], ["--ticks", "10"]),
    ("benchmarks.drain_bench", ["--repeat", "20"], ["--repeat", "5"]),
    ("benchmarks.probe_bench", ["--count", "500"], ["--count", "200"]),
    ("benchmarks.serve_viewers", ["--seconds", "30"], ["--seconds", "5", "--viewers", "1", "2"]),
]


def _run_masked(argv: list[str]) -> int:
    """Run one benchmark, its output (errors included) printed line by line through
    ``gpucon.redact``: results get pasted into issues and chats."""
    from gpucon.redact import redact

    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(redact(line), end="", flush=True)
    return proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("only", nargs="*", help="run only these (e.g. tick_cost startup_cpu)")
    parser.add_argument(
        "--base",
        default=None,
        help="another checkout (e.g. `git archive` of an older commit) "
        "that steady_state, key_latency and idle_terminal measure beside this one, in the same "
        "run",
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.node()} {platform.machine()}, {platform.python_version()}, "
        f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores"
    )
    failed = 0
    for module, full, quick in BENCHMARKS:
        short = module.rsplit(".", 1)[1]
        if args.only and short not in args.only:
            continue
        print(f"\n== {short}", flush=True)
        started = time.perf_counter()
        argv = [sys.executable, "-m", module, *(quick if args.quick else full)]
        if args.base and short in ("steady_state", "key_latency", "idle_terminal"):
            argv += ["--base", args.base]
        rc = _run_masked(argv)
        print(f"({short}: {time.perf_counter() - started:.0f} s, exit {rc})", flush=True)
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
