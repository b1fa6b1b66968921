"""A tiny CUDA client through libcuda (ctypes): creates a context, allocates 1 MiB, then waits.

Used by the MPS device test: under an MPS control daemon, creating a context makes the daemon
start an MPS server. Prints ``ready`` once the context exists; exits when stdin closes.
"""

from __future__ import annotations

import ctypes
import sys


def main() -> int:
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(result: int, what: str) -> None:
        if result != 0:
            print(f"{what} failed: CUresult {result}", flush=True)
            raise SystemExit(1)

    check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate")
    pointer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(1 << 20)), "cuMemAlloc")
    print("ready", flush=True)
    sys.stdin.read()
    cuda.cuMemFree_v2(pointer)
    cuda.cuCtxDestroy_v2(context)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
