#!/bin/bash
# Everything the NVML/MPS work runs on the GPU machine, in one call of the device tool:
#   bash tests/device/run_on_device.sh [STAGE...]   (OUT=folder for results; default /tmp/out)
# stages (default: mps record tests bench):
#   mps      raw answers of nvidia-cuda-mps-control on a private pipe dir (to check the parsers)
#   record   record h200.json (NvmlSource over real NVML, GPU under a CUDA load) into $OUT
#   tests    the gpu-marked tests (tests/device)
#   mpsrestart  only the MPS tests (the restart through gpucon's action; figures in $OUT)
#   bench    benchmarks/nvml_bench.py
#   probe    benchmarks/nvml_gpm_probe.py under a CUDA load (GPM answers by spacing/metric set)
#   health   tests/device/nvml_health_probe.py: raw XID-event and clock-reason answers
#   compare  benchmarks/nvml_console_vs_nvitop.py (needs the .whl wheels carried: textual, nvitop);
#            COMPARE_ARGS adds arguments (e.g. "--base DIR --starts 9")
#   startup  benchmarks/startup_cpu.py --startup-only: the demo's first frame vs a Textual
#            hello-world (needs the textual wheels); STARTUP_ARGS adds arguments ("--base DIR")
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STAGES=" ${*:-mps record tests bench} "
want() { [[ "$STAGES" == *" $1 "* ]]; }
export PYTHONUNBUFFERED=1 PYTHONPATH=.
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
fi
LOG=$OUT/log.txt
{
  date -u; nvidia-smi; nvidia-smi -q | grep -iE "MIG|Product Name|Driver|CUDA" | head -20
  python3 -c "import pynvml,sys; print('nvidia-ml-py', pynvml.__version__ if hasattr(pynvml,'__version__') else '?', sys.version)"
  which nvidia-cuda-mps-control
} >"$LOG" 2>&1

# --- 1. MPS exploration -------------------------------------------------------------------
want mps && (
  P=/tmp/mpsx/pipe; L=/tmp/mpsx/log; mkdir -p $P $L
  export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$L
  mps() { echo "== $1"; echo "$1" | timeout 10 nvidia-cuda-mps-control; echo "rc=$?"; }
  echo "== before start (no daemon)"; echo get_server_list | timeout 5 nvidia-cuda-mps-control; echo "rc=$?"
  timeout 10 nvidia-cuda-mps-control -d; echo "start rc=$?"; sleep 0.5; ls -la $P
  mps get_server_list; mps get_default_active_thread_percentage
  mps "set_default_active_thread_percentage 50"; mps get_default_active_thread_percentage
  mps "set_default_device_pinned_mem_limit 0 2G"; mps "get_default_device_pinned_mem_limit 0"
  mkfifo /tmp/mpsx/hold
  python3 tests/device/cuda_client.py < /tmp/mpsx/hold > /tmp/mpsx/client.txt 2>&1 &
  exec 7>/tmp/mpsx/hold
  for i in $(seq 50); do grep -q ready /tmp/mpsx/client.txt 2>/dev/null && break; sleep 0.2; done
  cat /tmp/mpsx/client.txt
  mps get_server_list
  SP=$(echo get_server_list | timeout 10 nvidia-cuda-mps-control | head -1)
  mps "get_active_thread_percentage $SP"; mps get_device_client_list
  exec 7>&-; wait
  mps quit; sleep 1; ls -la $P; pgrep -a nvidia-cuda-mps
  echo "== after quit"; echo get_server_list | timeout 5 nvidia-cuda-mps-control; echo "rc=$?"
  echo "== control.log"; cat $L/control.log
) >"$OUT/mps_explore.txt" 2>&1

# --- GPM probe under load -------------------------------------------------------------------
if want probe; then
  python3 tests/device/cuda_load.py 12 >/tmp/load.txt 2>&1 &
  LOADPID=$!
  for i in $(seq 100); do grep -q ready /tmp/load.txt 2>/dev/null && break; sleep 0.1; done
  timeout 60 python3 benchmarks/nvml_gpm_probe.py "$OUT/gpm_probe.json" >"$OUT/gpm_probe.txt" 2>&1
  echo "probe rc=$?" >>"$LOG"; wait $LOADPID
fi

# --- raw GPU-health answers (events, clock event reasons idle and under load) --------------
if want health; then
  timeout 60 python3 tests/device/nvml_health_probe.py --load >"$OUT/nvml_health.json" \
    2>"$OUT/nvml_health_err.txt"
  echo "health rc=$?" >>"$LOG"
fi

# --- 2. recording under load --------------------------------------------------------------
if want record; then
  python3 tests/device/cuda_load.py 14 >/tmp/load.txt 2>&1 &
  LOADPID=$!
  for i in $(seq 100); do grep -q ready /tmp/load.txt 2>/dev/null && break; sleep 0.1; done
  python3 -m tests.helpers.nvml_record "$OUT/h200.json" --reads 6 --interval 1.0 >>"$LOG" 2>&1
  echo "record rc=$?" >>"$LOG"; cat /tmp/load.txt >>"$LOG"; wait $LOADPID
fi

# --- 3. gpu-marked tests ------------------------------------------------------------------
if want tests; then
  timeout 240 python3 -m pytest tests/device -v -rA -p no:cacheprovider -o addopts="" \
    >"$OUT/gpu_tests.txt" 2>&1
  echo "pytest rc=$?" >>"$LOG"
fi

if want mpsrestart; then
  OUT=$OUT timeout 300 python3 -m pytest tests/device/test_mps_gpu.py \
    tests/device/test_mps_restart_gpu.py -v -s -rA -p no:cacheprovider -o addopts="" \
    >"$OUT/mps_restart_tests.txt" 2>&1
  echo "mps pytest rc=$?" >>"$LOG"
fi

# --- 4. benchmark ---------------------------------------------------------------------------
if want bench; then
  timeout 240 python3 benchmarks/nvml_bench.py "$OUT/nvml_bench.json" >"$OUT/nvml_bench.md" 2>&1
  echo "bench rc=$?" >>"$LOG"
fi

# --- 5. gpucon live vs nvitop ---------------------------------------------------------------
if want compare; then
  { python3 -c "import textual, nvitop, gpucon.app; print('textual', textual.__version__)"
    timeout 400 python3 -m benchmarks.nvml_console_vs_nvitop "$OUT/console_vs_nvitop.json" \
      --seconds 60 $COMPARE_ARGS; echo "compare rc=$?"; } >"$OUT/compare.txt" 2>&1
fi

# --- 6. the demo's start-up against a Textual hello-world -------------------------------------
if want startup; then
  timeout 200 python3 -m benchmarks.startup_cpu --startup-only --repeat 25 $STARTUP_ARGS \
    >"$OUT/startup.txt" 2>&1
  echo "startup rc=$?" >>"$LOG"
fi
date -u >>"$LOG"
