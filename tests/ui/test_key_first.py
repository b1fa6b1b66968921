"""A key is answered before the snapshot that came while it was on its way.

The terminal's input thread tells the app of a key as it reads it (``app_input``), so the hub
holds back from then on; a snapshot that arrives while a key is answered waits until the
key's hold ends (at most ``SNAPSHOT_HOLD_S``), and the newest one is shown then.
"""

from __future__ import annotations

import pytest
from textual import events
from textual.driver import Driver
from textual.message import Message

import gpucon.app
from gpucon.app import GpuconApp
from gpucon.app_input import key_noticing
from tests.ui.rig import StaticFeed, sim_rig, wait_until

SIZE = (160, 40)


async def test_a_snapshot_that_comes_while_a_key_is_answered_is_shown_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # long enough for a loaded machine to post both before it ends
    monkeypatch.setattr(gpucon.app, "KEY_HOLD_S", 2.0)
    monkeypatch.setattr(gpucon.app, "SNAPSHOT_HOLD_S", 60.0)
    rig = sim_rig(size=16)
    app = rig.app(warmup=3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = app.snapshot
        assert shown is not None
        newer, newest, later = rig.step(), rig.step(), rig.step()  # made before: a step blocks
        await pilot.press("s")
        app._from_hub_thread(newer)
        await pilot.pause()
        assert app.snapshot is shown  # held while the key is answered
        app._from_hub_thread(newest)
        await pilot.pause()
        assert app.snapshot is shown
        # the hold ends: the newest is shown, the one it replaced never is
        await wait_until(pilot, lambda: app.snapshot is newest)
        assert not app._answering_a_key()
        # with no key being answered a snapshot is shown at once
        app._from_hub_thread(later)
        await wait_until(pilot, lambda: app.snapshot is later, timeout_s=5.0)


async def test_a_burst_of_keys_holds_a_snapshot_back_no_longer_than_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpucon.app, "KEY_HOLD_S", 5.0)  # the hold never ends by itself
    monkeypatch.setattr(gpucon.app, "SNAPSHOT_HOLD_S", 0.2)
    rig = sim_rig(size=16)
    app = rig.app(warmup=3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = app.snapshot
        first, second = rig.step(), rig.step()
        await pilot.press("s")
        app._from_hub_thread(first)
        await pilot.pause()
        assert app.snapshot is shown and app._answering_a_key()
        await pilot.pause(0.3)  # past SNAPSHOT_HOLD_S, still answering keys
        app._from_hub_thread(second)
        await wait_until(pilot, lambda: app.snapshot is second, timeout_s=5.0)


def test_the_driver_tells_of_a_key_before_passing_it_on() -> None:
    passed: list[Message] = []
    noticed: list[int] = []

    class Recording(Driver):
        """Only what the wrapper calls: the message handed on."""

        def process_message(self, message: Message) -> None:
            passed.append(message)

        def write(self, data: str) -> None: ...

        def start_application_mode(self) -> None: ...

        def stop_application_mode(self) -> None: ...

        def disable_input(self) -> None: ...

    cls = key_noticing(Recording, lambda: noticed.append(len(passed)))
    assert issubclass(cls, Recording)
    driver = cls.__new__(cls)  # process_message needs no state of the driver's
    key = events.Key("a", "a")
    driver.process_message(key)
    assert noticed == [0] and passed == [key]  # noticed first, then passed on
    resize = events.Resize.from_dimensions((80, 24), None)
    driver.process_message(resize)
    assert noticed == [0] and passed == [key, resize]  # only keys are noticed


async def test_the_app_runs_on_its_noticing_driver() -> None:
    rig = sim_rig(size=16)
    app = rig.app(warmup=1)
    assert app.driver_class.__name__.startswith("KeyNoticing")
    app._key_coming()  # as the input thread calls it
    assert not rig.hub.ui_idle.is_set() and app.key_within(1.0)
    assert app._answering_a_key()


async def test_a_feed_without_a_hub_shows_its_snapshots_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replay's snapshots are what its keys ask for (a seek, a step): never held."""
    monkeypatch.setattr(gpucon.app, "KEY_HOLD_S", 5.0)
    rig = sim_rig(size=16)
    first, second = rig.step(), rig.step()
    app = GpuconApp(StaticFeed(first), autostart=False, clock=rig.clock)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("s")
        assert app._key_hold is not None  # the key's hold runs
        app._from_hub_thread(second)
        await wait_until(pilot, lambda: app.snapshot is second, timeout_s=3.0)
