"""The locks an action holds while it runs: taking them all or none, renewing them, losing them.

A lock is a lease with a TTL in the registry. ``LockKeeper`` renews every lease a third of the
TTL apart in a background thread and fails safe: a renewal that raises (Redis unreachable),
that the registry refuses (the lease expired or was taken over), or that is overdue (no
renewal has succeeded for one and a half renewal intervals: the lease may lapse before the
next one) marks the lease lost for good. The guard asks ``LockKeeper.lost_why()`` at every
step boundary and stops the action there; it never acts on a lock it may no longer hold.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from gpucon.actions.plan import Plan
from gpucon.controls.base import Controls, LockLease

# a renewal is late this long after it was due: half an interval, at least a second (a busy
# machine must not make a healthy lease look lost), but always well inside the TTL
LATE_GRACE_S = 1.0
LATE_AT_MOST = 0.9  # of the TTL


def lock_targets(plan: Plan) -> tuple[str, ...]:
    """Every lock a plan needs: its target's and each blast-radius backend's, sorted.

    One order for every console: two guards wanting overlapping sets meet at the first lock
    they share, so one of them always gets all it needs.
    """
    return tuple(sorted({plan.target, *plan.blast_radius.backends}))


def acquire_locks(controls: Controls, plan: Plan, ttl_s: float) -> list[LockLease]:
    """All of ``lock_targets(plan)`` or none: on LockHeld (or any error) what was taken is
    released before the error propagates. A backend's lock names the action and its target
    ("drain node-a"), so a colleague refused on it learns which action holds it."""
    taken: list[LockLease] = []
    try:
        for key in lock_targets(plan):
            doing = plan.action if key == plan.target else f"{plan.action} {plan.target}"
            taken.append(controls.registry.acquire_lock(key, controls.operator, doing, ttl_s))
    except BaseException:
        release_locks(controls, taken)
        raise
    return taken


def release_locks(controls: Controls, leases: list[LockLease]) -> None:
    for lease in reversed(leases):
        with contextlib.suppress(Exception):  # otherwise it expires by its TTL
            controls.registry.release_lock(lease)


class LockKeeper:
    """Renews the leases every third of their TTL until stopped; marks them lost, for good,
    when a renewal raises, is refused or is late (see the module docstring)."""

    def __init__(
        self,
        controls: Controls,
        leases: list[LockLease],
        ttl_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.controls = controls
        self.leases = leases
        self.ttl_s = ttl_s
        self.interval_s = ttl_s / 3.0
        grace = max(self.interval_s * 0.5, LATE_GRACE_S)
        self.late_after_s = min(ttl_s * LATE_AT_MOST, self.interval_s + grace)
        self._clock = clock
        self._wall = wall
        self._last_ok = clock()  # the leases were taken (or all renewed) at this time
        self._lost: dict[str, str] = {}  # target -> why
        self.lost_at: float | None = None  # wall time the loss was noticed
        self._guard = threading.Lock()
        self._stop = threading.Event()
        name = f"lock-renew:{leases[0].target}" if leases else "lock-renew"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> LockKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.ttl_s)

    @property
    def lost(self) -> dict[str, str]:
        """Target -> why its lease is lost (empty while every lease holds)."""
        self.lost_why()  # an overdue renewal counts even while the renewal thread is stuck
        with self._guard:
            return dict(self._lost)

    def lost_why(self) -> str | None:
        """Why the leases can no longer be trusted, or None while they hold."""
        late = self._clock() - self._last_ok
        if late > self.late_after_s:
            self._mark(
                [lease.target for lease in self.leases],
                f"no renewal succeeded for {late:.1f} s (renewed every {self.interval_s:.1f} s, "
                f"TTL {self.ttl_s:g} s)",
            )
        with self._guard:
            if not self._lost:
                return None
            return "; ".join(f"{t}: {why}" for t, why in sorted(self._lost.items()))

    def _mark(self, targets: list[str], why: str) -> None:
        with self._guard:
            for target in targets:
                self._lost.setdefault(target, why)
            if self._lost and self.lost_at is None:
                self.lost_at = self._wall()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            started = self._clock()
            renewed = True
            for lease in self.leases:
                try:
                    if not self.controls.registry.renew_lock(lease, self.ttl_s):
                        renewed = False
                        self._mark([lease.target], "it had expired or was taken over")
                except Exception as exc:  # Redis unreachable: the lease will lapse unseen
                    renewed = False
                    self._mark([lease.target], f"renewal failed: {type(exc).__name__}: {exc}")
            if renewed:
                self._last_ok = started
            else:
                self.lost_why()  # note the time at once, not at the next step boundary
