"""A CUDA load for device tests and benchmarks: matrix products for N seconds (PyTorch).

Prints ``ready`` when the first product ran (or the reason it cannot run), then keeps the GPU
busy until the time is up.
"""

from __future__ import annotations

import sys
import time


def main(seconds: float) -> int:
    try:
        import torch  # type: ignore[import-not-found]

        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = a @ a
        torch.cuda.synchronize()
    except Exception as exc:  # no torch / no GPU: say why
        print(f"cannot load the GPU: {type(exc).__name__}: {exc}", flush=True)
        return 1
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            b = a @ a
        torch.cuda.synchronize()
    del b
    return 0


if __name__ == "__main__":
    raise SystemExit(main(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0))
