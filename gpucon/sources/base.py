"""The one small interface every source implements, and the guard that keeps reads safe.

A source's ``read()`` blocks (the hub calls it in a worker thread), bounds its own IO with a
timeout, and returns a Reading. ``guarded_read`` turns anything a source raises into a
``down`` Reading, so a broken source can never take the hub or the UI with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from gpucon.model.reading import Reading, failed_reading
from gpucon.redact import redact


@runtime_checkable
class Source(Protocol):
    """A read-only data source."""

    name: str
    # seconds between the end of one read and the start of the next
    cadence_s: float
    # seconds a read may take before the hub reports it as timed out
    timeout_s: float

    def read(self) -> Reading: ...

    def close(self) -> None: ...


def describe_error(exc: BaseException) -> str:
    """``Type: first line of the message``, credentials masked (``gpucon.redact``): a client
    library's error may quote the URL, password and all, and this text is kept and shown."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return redact(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def guarded_read(source: Source, clock: Callable[[], float] = time.time) -> Reading:
    """Read ``source``; any exception becomes a ``down`` Reading naming the error."""
    started = clock()
    perf = time.perf_counter()
    try:
        return source.read()
    except Exception as exc:  # a source must never raise into the hub
        return failed_reading(source.name, started, time.perf_counter() - perf, describe_error(exc))
