"""A STAND-IN ``nvidia-cuda-mps-control`` and MPS-client "servers" for tests without a GPU.

The control stand-in is a shell script put first on PATH: it records its argv and stdin, keeps
a daemon's state in files under the pipe directory, and answers like the real control program
as seen on the H200 (driver 580): a pid file while running, the socket left after ``quit``.
``MPS_STANDIN_FAIL_START`` (a file that exists) makes ``-d`` fail, to break a restart midway;
``MPS_STANDIN_OLD`` makes it refuse the pinned-memory commands like an old driver.
The server script is an inference server stand-in: ``start`` refuses without a daemon, records
the CUDA_MPS_* variables it was given, runs a sleeping process and registers it with the
daemon as an MPS server (as a real client makes the daemon do); ``stop`` and ``ready``.
The real daemon runs in tests/device/test_mps_gpu.py and test_mps_restart_gpu.py.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

CONTROL = r"""#!/bin/sh
log="${MPS_STANDIN_LOG:-/dev/null}"
state="$CUDA_MPS_PIPE_DIRECTORY"
pid="$state/nvidia-cuda-mps-control.pid"
echo "argv:$*" >> "$log"
echo "pipe:$CUDA_MPS_PIPE_DIRECTORY log:$CUDA_MPS_LOG_DIRECTORY" >> "$log"
if [ "$1" = "-d" ]; then
  [ -n "$MPS_STANDIN_FAIL_START" ] && [ -e "$MPS_STANDIN_FAIL_START" ] && {
    echo "cannot start: (stand-in failure)" >&2; exit 1; }
  [ -e "$pid" ] && { echo "An instance of this daemon is already running" >&2; exit 1; }
  : > "$state/control"; echo $$ > "$pid"; echo 100.0 > "$state/pct"; exit 0
fi
read -r line
echo "stdin:$line" >> "$log"
[ -n "$MPS_STANDIN_HANG" ] && sleep 5
[ -e "$pid" ] || { echo "Cannot find MPS control daemon process" >&2; exit 1; }
set -- $line
case "$1" in
  get_server_list) cat "$state/servers" 2>/dev/null ;;
  get_default_active_thread_percentage) cat "$state/pct" ;;
  set_default_active_thread_percentage) echo "$2" > "$state/pct"; echo "$2" ;;
  get_active_thread_percentage) cat "$state/pct" ;;
  get_device_client_list) cat "$state/clients_$2" 2>/dev/null ;;
  *_device_pinned_mem_limit) [ -n "$MPS_STANDIN_OLD" ] && {
    echo "Unrecognized command $1" >&2; exit 1; }
    case "$1" in
      set_*) echo "$3" > "$state/limit_$2" ;;
      get_*) cat "$state/limit_$2" 2>/dev/null || echo "None" ;;
    esac ;;
  quit) rm -f "$pid" "$state/servers" ;;  # the real daemon leaves its socket
  *) echo "Unrecognized command $1" >&2; exit 1 ;;
esac
"""

SERVER = r"""#!/bin/sh
# server.sh start|stop|ready NAME DIR
name="$2"; dir="$3"
case "$1" in
  start)
    [ -e "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid" ] || {
      echo "no MPS daemon at $CUDA_MPS_PIPE_DIRECTORY" >&2; exit 1; }
    env | grep '^CUDA_MPS' | sort > "$dir/$name.env"
    nohup sleep 300 >/dev/null 2>&1 &
    echo $! > "$dir/$name.pid"; echo $! >> "$CUDA_MPS_PIPE_DIRECTORY/servers"
    : > "$dir/$name.ready" ;;
  stop)
    [ -e "$dir/$name.pid" ] && kill "$(cat "$dir/$name.pid")" 2>/dev/null
    rm -f "$dir/$name.pid" "$dir/$name.ready"; exit 0 ;;
  ready) test -e "$dir/$name.ready" ;;
esac
"""


def write_script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def install_control(bin_dir: Path) -> Path:
    """Put the control stand-in in ``bin_dir`` (as ``nvidia-cuda-mps-control``)."""
    return write_script(bin_dir / "nvidia-cuda-mps-control", CONTROL)


def install_server(directory: Path) -> Path:
    return write_script(directory / "server.sh", SERVER)


def stop_servers(directory: Path) -> None:
    """Kill every stand-in server still running under ``directory`` (test teardown)."""
    import contextlib
    import signal

    for pid_file in directory.glob("*.pid"):
        with contextlib.suppress(ValueError, OSError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
