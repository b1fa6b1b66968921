"""The lab stack for integration tests: scheduler + backend servers on loopback, against the
``redis_url`` fixture's redis-server (the same code ``gpucon lab`` runs).

``start_lab`` runs them as real child processes (``gpucon scheduler``, ``gpucon backend``);
the helpers below read a backend's served-request log and flip its readiness over HTTP.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from gpucon.lab.lab import LabOptions, LabStack


@contextlib.contextmanager
def start_lab(redis_url: str, directory: Path, **options: Any) -> Iterator[LabStack]:
    """A started LabStack using ``redis_url`` (no prometheus unless asked); stopped on exit."""
    options.setdefault("prometheus", False)
    stack = LabStack(LabOptions(redis_url=redis_url, directory=directory, **options))
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def served(backend_url: str) -> list[dict[str, Any]]:
    """The backend's log of every request it served (id, entry_id, arrived_at, ...)."""
    r = httpx.get(f"{backend_url}/lab/served", timeout=5.0)
    r.raise_for_status()
    log: list[dict[str, Any]] = r.json()["served"]
    return log


def set_ready(backend_url: str, ready: bool) -> None:
    r = httpx.post(f"{backend_url}/lab/ready", json={"ready": ready}, timeout=5.0)
    r.raise_for_status()
