"""An MPS client standing in for an inference server in the device test (libcuda via ctypes).

``start NAME DIR`` launches ``serve`` detached (its own session, output to DIR/NAME.log) and
returns; ``serve`` creates a CUDA context through whatever MPS daemon the environment names,
allocates and clears 64 MiB on the GPU (work the MPS server must do), reads how many SMs the
context may use (``cuCtxGetExecAffinity``: the active-thread percentage as MPS applied it) and
the memory it sees, tries to allocate past its pinned-memory limit (the CUresult, 0 when MPS
let it through; -1 without a limit), writes ``ready pid sm sm_total mem_total_mib over_rc``
to DIR/NAME.status and
waits for SIGTERM. ``stop NAME DIR`` ends it and waits; ``ready NAME DIR`` exits 0 once served.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_EXEC_AFFINITY_TYPE_SM_COUNT = 0


class ExecAffinity(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("sm_count", ctypes.c_uint)]


def serve(status: Path) -> int:
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(result: int, what: str) -> None:
        if result != 0:
            status.write_text(f"failed {what}: CUresult {result}\n")
            raise SystemExit(1)

    check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate")
    size = 64 << 20
    pointer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)), "cuMemAlloc")
    check(cuda.cuMemsetD8_v2(pointer, ctypes.c_ubyte(7), ctypes.c_size_t(size)), "cuMemsetD8")
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    total_sms = ctypes.c_int()
    check(
        cuda.cuDeviceGetAttribute(
            ctypes.byref(total_sms), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device
        ),
        "cuDeviceGetAttribute",
    )
    affinity = ExecAffinity()
    got = cuda.cuCtxGetExecAffinity(ctypes.byref(affinity), CU_EXEC_AFFINITY_TYPE_SM_COUNT)
    sms = affinity.sm_count if got == 0 else -1
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    # the pinned-memory limit MPS gave this client: an allocation past it must fail
    over = -1  # no limit given
    limit = limit_bytes(os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ""))
    if limit is not None:
        big = ctypes.c_uint64()
        over = cuda.cuMemAlloc_v2(ctypes.byref(big), ctypes.c_size_t(limit + (256 << 20)))
        if over == 0:
            cuda.cuMemFree_v2(big)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    status.write_text(f"ready {os.getpid()} {sms} {total_sms.value} {total.value >> 20} {over}\n")
    while not stop:
        time.sleep(0.05)
    cuda.cuMemFree_v2(pointer)
    cuda.cuCtxDestroy_v2(context)
    return 0


def limit_bytes(text: str) -> int | None:
    """Device 0's limit from ``0=2G`` (K, M, G suffixes); None when there is none."""
    for part in text.split(","):
        device, _, size = part.partition("=")
        if device.strip() == "0" and size:
            units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
            unit = units.get(size[-1].upper(), 1)
            return int(float(size.rstrip("KMGkmg")) * unit)
    return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


def main(verb: str, name: str, directory: str) -> int:
    folder = Path(directory)
    status, pid_file = folder / f"{name}.status", folder / f"{name}.pid"
    if verb == "serve":
        return serve(status)
    if verb == "start":
        status.unlink(missing_ok=True)
        with open(folder / f"{name}.log", "ab") as log:
            child = subprocess.Popen(
                [sys.executable, __file__, "serve", name, directory],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        pid_file.write_text(str(child.pid))
        return 0
    if verb == "stop":
        if pid_file.exists():
            pid = int(pid_file.read_text())
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
            pid_file.unlink()
        status.unlink(missing_ok=True)
        return 0
    if verb == "ready":
        return 0 if status.exists() and status.read_text().startswith("ready") else 1
    return 2


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:4]))
