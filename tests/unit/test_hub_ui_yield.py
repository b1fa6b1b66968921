"""The hub's thread gives way while the UI answers a key (``Hub.ui_idle``), never for long.

Python runs one thread at a time, and the hub's tick is Python: a key answered while a tick
runs shares the interpreter with it. The UI clears ``ui_idle`` when a key comes; a tick then
waits between its phases until it is set again, at most ``UI_WAIT_S`` in all, so a UI that
never says it is done slows the ticks down but never stops them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gpucon.hub import UI_WAIT_S, Hub
from gpucon.model.fleet import Health, Slot, SlotKind
from gpucon.model.reading import Reading
from gpucon.model.snapshot import Snapshot


class OneSlot:
    """A source with one GPU slot (what a tick needs to have something to merge)."""

    name = "nvml"
    cadence_s = 0.05
    timeout_s = 1.0

    def read(self) -> Reading:
        slot = Slot(id="h/gpu0", kind=SlotKind.GPU, gpu_uuid="GPU-0", activity_pct=50.0)
        return Reading(self.name, Health.OK, time.time(), slots=(slot,))

    def close(self) -> None:
        pass


def test_a_tick_waits_while_the_ui_is_busy_but_no_longer_than_its_bound() -> None:
    hub = Hub([OneSlot()])
    hub.poll_once()
    hub.tick()
    hub.ui_idle.clear()
    started = time.monotonic()
    snapshot = hub.tick()
    waited = time.monotonic() - started
    assert UI_WAIT_S * 0.9 <= waited < UI_WAIT_S + 1.0  # gave way, then went on all the same
    assert snapshot.slots["h/gpu0"].activity_pct == 50.0


def test_a_tick_goes_on_as_soon_as_the_ui_is_idle_again() -> None:
    hub = Hub([OneSlot()])
    hub.poll_once()
    hub.tick()
    hub.ui_idle.clear()
    threading.Timer(0.02, hub.ui_idle.set).start()
    started = time.monotonic()
    hub.tick()
    assert time.monotonic() - started < UI_WAIT_S * 0.8


def test_the_background_hub_keeps_ticking_while_the_ui_never_says_it_is_idle() -> None:
    hub = Hub([OneSlot()], refresh_s=0.05)
    hub.ui_idle.clear()
    got: list[Snapshot] = []
    hub.start(got.append)
    try:
        deadline = time.monotonic() + 5.0
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        hub.stop()
    assert len(got) >= 3


def test_the_alert_rules_give_way_between_rules_too() -> None:
    """A key that comes while the rules run (tens of ms at 2,048 GPUs) waits for one rule, not
    for all of them: the tick checks ``ui_idle`` before each rule after the first."""
    from gpucon.model import alerts

    hub = Hub([OneSlot()])
    hub.poll_once()
    hub.tick()
    checks: list[bool] = []
    real = hub.ui_gate

    def counted() -> Callable[[], None]:
        gate = real()

        def check() -> None:
            checks.append(hub.ui_idle.is_set())
            gate()

        return check

    hub.ui_gate = counted  # type: ignore[method-assign,assignment]
    hub.poll_once()  # a new reading: the tick merges again
    hub.tick()
    # four checks inside the merge, five between the tick's phases, three between the
    # history's kinds, one before every rule but the first
    assert len(checks) == 4 + 5 + 3 + len(alerts.RULES) - 1
