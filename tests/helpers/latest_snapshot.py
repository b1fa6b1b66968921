"""The hub's snapshots, handed on from its thread and waited on with a deadline: the lab-stack
and recovery tests subscribe one of these to a hub (or a feed) and wait for what the screen
would show to change. ``Latest`` keeps only the newest snapshot; ``Snapshots`` keeps them all
(a test that counts ticks or reads what came between two moments)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gpucon.model.snapshot import Snapshot


def _wait(
    cond: threading.Condition,
    find: Callable[[], Snapshot | None],
    last: Callable[[], Snapshot | None],
    timeout_s: float,
    what: str,
) -> Snapshot:
    """``find()``'s snapshot once it has one, woken by ``cond`` (held by the caller)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = find()
        if found is not None:
            return found
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no snapshot {what} in {timeout_s}s; last {last()}")
        cond.wait(left)


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
        def find() -> Snapshot | None:
            return self.snap if self.snap is not None and check(self.snap) else None

        with self.cond:
            return _wait(self.cond, find, lambda: self.snap, timeout_s, what)


class Snapshots:
    """Every snapshot the hub hands on, in order; waits for the first one that matches."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.cond = threading.Condition()

    def __call__(self, snapshot: Snapshot) -> None:
        with self.cond:
            self.snapshots.append(snapshot)
            self.cond.notify_all()

    @property
    def seq(self) -> int:
        """The newest snapshot's ``seq`` (0 before the first)."""
        with self.cond:
            return self.snapshots[-1].seq if self.snapshots else 0

    def first(
        self,
        check: Callable[[Snapshot], bool],
        timeout_s: float,
        what: str,
        *,
        since: float | None = None,
        after_seq: int | None = None,
    ) -> Snapshot:
        """The first snapshot for which ``check`` holds, of those taken at ``since`` (wall
        clock) or later and numbered past ``after_seq``, where given."""

        def wanted(snap: Snapshot) -> bool:
            if since is not None and snap.taken_at < since:
                return False
            if after_seq is not None and snap.seq <= after_seq:
                return False
            return check(snap)

        def find() -> Snapshot | None:
            return next(filter(wanted, self.snapshots), None)

        with self.cond:
            return _wait(self.cond, find, self._newest, timeout_s, what)

    def _newest(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None

    def after(self, since: float) -> list[Snapshot]:
        """The snapshots taken at ``since`` (wall clock) or later."""
        with self.cond:
            return [s for s in self.snapshots if s.taken_at >= since]
