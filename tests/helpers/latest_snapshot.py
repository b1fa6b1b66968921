"""The hub's newest snapshot, handed on from its thread and waited on with a deadline: the
lab-stack tests subscribe it to a hub and wait for the screen's facts to change."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gpucon.model.snapshot import Snapshot


class Latest:
    """The hub's newest snapshot, waited on with a deadline."""

    def __init__(self) -> None:
        self.snap: Snapshot | None = None
        self.cond = threading.Condition()

    def __call__(self, snapshot: Snapshot) -> None:
        with self.cond:
            self.snap = snapshot
            self.cond.notify_all()

    def wait(self, check: Callable[[Snapshot], bool], timeout_s: float, what: str) -> Snapshot:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                if self.snap is not None and check(self.snap):
                    return self.snap
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no snapshot {what} in {timeout_s}s; last {self.snap}")
                self.cond.wait(left)
