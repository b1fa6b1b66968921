"""Python's cyclic garbage collector held off while a frame is built or a seek decodes.

Both allocate tens of thousands of containers at once (a seek's parsed keyframe and ~17,000
model objects; a delta's changed rows), which would set off collector passes over the whole
heap (the console's Textual objects included) for objects that are either kept or freed by
reference counting a moment later: at 512 GPUs a seek spent a third of its time in them.
The collector is off only while such work runs and is back on after it (counted, so
that two threads pausing it at once cannot leave it off).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_holders = 0
_resume = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No collector pass while the block runs (the collector's state is restored after)."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()
