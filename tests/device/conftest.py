"""Device tests: run only where a real NVIDIA GPU and NVML are present (through the device tool).

Every test here is marked ``gpu``; without a GPU (CI) they are skipped, not failed.
"""

from __future__ import annotations

import pytest


def _nvml_problem() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
    except Exception as exc:  # no driver, no library, no GPU: skip
        return f"NVML cannot initialise here: {type(exc).__name__}: {exc}"
    return None if count > 0 else "NVML sees no GPU"


_PROBLEM = _nvml_problem()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/device/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if _PROBLEM is not None:
                item.add_marker(pytest.mark.skip(reason=_PROBLEM))
