"""A process-wide request to stop running actions at their next step boundary.

When the console's terminal goes away (SIGHUP, the pty closed), nobody is left to watch an
action: ``request_stop`` makes the guard stop each running action where it would stop for a
lost lock (a step starting, or a wait polling), record the outcome and release its locks;
``wait_idle`` lets the console wait for that before the process exits. New actions are
refused once a stop is requested.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_state = threading.Condition()
_why: str | None = None
_running = 0


def request_stop(why: str) -> None:
    """Stop every running action at its next step boundary, and start no new one."""
    global _why
    with _state:
        _why = why


def stop_requested() -> str | None:
    """Why actions must stop, or None while they may run."""
    return _why


def clear() -> None:
    """Allow actions again (a test, or a console that outlives the stop)."""
    global _why
    with _state:
        _why = None


@contextmanager
def running() -> Iterator[None]:
    """Counts an action as running while the block runs (``wait_idle`` waits for it)."""
    global _running
    with _state:
        _running += 1
    try:
        yield
    finally:
        with _state:
            _running -= 1
            _state.notify_all()


def wait_idle(timeout_s: float) -> bool:
    """Wait until no action runs (True), or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    with _state:
        while _running:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _state.wait(left)
    return True
