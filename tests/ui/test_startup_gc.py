"""The garbage collector is off while the console starts and on again after its first frame.

``gpucon.commands.cli.main`` and ``gpucon.commands.console.run`` turn Python's cyclic collector
off while they build the parser, import the command and start the console (start-up speed);
these tests check that it always comes back on, and that a caller who had it off keeps it off.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucon.app import GpuconApp
from gpucon.commands import console, gc_pace
from gpucon.commands.cli import main
from tests.ui.rig import Rig

ROOT = Path(__file__).resolve().parents[2]

# a fresh interpreter runs ``gpucon demo`` up to the App's start and lists the collections
# made from ``main()`` on (the App's own run is left out: its first frame is headless here)
COLLECTIONS_CHILD = """\
import gc, json
from gpucon.commands import cli, console

collected = []
gc.callbacks.append(lambda phase, info: phase == "start" and collected.append(info["generation"]))
drawn = console._console

def _console(*args):
    from gpucon.app import GpuconApp

    GpuconApp.run = lambda self, *a, **k: print(json.dumps(collected))
    return drawn(*args)

console._console = _console
collected.clear()
cli.main(["demo"])
"""


@pytest.fixture
def gc_restored() -> Iterator[None]:
    was_on = gc.isenabled()
    switch = sys.getswitchinterval()  # the console sets 1 ms when it opens its session
    yield
    sys.setswitchinterval(switch)
    if was_on:
        gc.enable()
    else:
        gc.disable()


@pytest.fixture
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in ("GPUCON_CONFIG", "GPUCON_REDIS_URL", "GPUCON_PROMETHEUS_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("gc_restored", "no_config")
@pytest.mark.parametrize("argv", [["demo", "--refresh", "0"], ["demo", "--bogus"], ["--help"]])
def test_a_start_that_fails_or_exits_turns_the_collector_back_on(argv: list[str]) -> None:
    gc.enable()
    with pytest.raises(SystemExit):
        main(argv)
    assert gc.isenabled()


@pytest.mark.usefixtures("gc_restored", "no_config")
def test_the_console_starts_with_the_collector_off_and_turns_it_on_after_the_first_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.enable()
    seen: list[tuple[bool, list[object]]] = []

    def run(app: GpuconApp, *args: object, **kwargs: object) -> None:
        seen.append((gc.isenabled(), list(app.after_first_frame)))

    monkeypatch.setattr(GpuconApp, "run", run)
    assert main(["demo"]) == 0
    [(on_while_running, callbacks)] = seen
    assert not on_while_running
    # after the first frame the collector goes on (threads switch often from before it)
    assert callbacks == [console._collector_on]
    assert gc.isenabled()  # the app returned: on again whatever happened
    gc.disable()
    thresholds = gc.get_threshold()
    try:  # after the first frame: what start-up built is frozen, and the collector is on
        console._collector_on()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == gc_pace.BACKSTOP_YOUNG  # the hub's thread collects
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("gc_restored", "no_config")
def test_a_caller_with_the_collector_off_keeps_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[object]] = []
    monkeypatch.setattr(GpuconApp, "run", lambda app, *a, **k: seen.append(app.after_first_frame))
    gc.disable()
    assert main(["demo"]) == 0
    # nothing to turn back on after the first frame
    assert seen == [[]]
    assert not gc.isenabled()


async def test_after_first_frame_callbacks_run_once_the_screen_is_drawn() -> None:
    app = Rig().app()
    calls: list[bool] = []
    app.after_first_frame.append(lambda: calls.append(app.screen.is_mounted))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert calls == [True]


def test_no_collection_runs_between_main_and_the_app(tmp_path: Path) -> None:
    """Importing the config and the model (the command's first imports after its parser)
    allocates tens of thousands of long-lived objects: with the collector on there, a
    start made ~25 collections (~4 ms of the demo's start-up)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCON_")}
    env.update(
        PYTHONPATH=str(ROOT),
        XDG_CONFIG_HOME=str(tmp_path / "config"),  # no config file: the demo's defaults
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    done = subprocess.run(
        [sys.executable, "-c", COLLECTIONS_CHILD],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_thread_lets_go_of_the_interpreter_after_1_ms() -> None:
    was = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        console._switch_often()
        assert sys.getswitchinterval() == pytest.approx(console.SWITCH_INTERVAL_S)
        assert console.SWITCH_INTERVAL_S < 0.005
    finally:
        sys.setswitchinterval(was)


def test_a_live_console_switches_threads_often_from_its_first_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first reads run in the hub's workers while the UI is imported: each NVML call
    gives the interpreter up and waits for it back, so the switching is quick from then."""
    from gpucon.config import load_config
    from gpucon.hub import Hub

    config = tmp_path / "config.toml"
    config.write_text('fleet = "local"\n\n[fleets.local.nvml]\nhost = ""\ntimeout_s = 2.0\n')
    seen: list[float] = []
    monkeypatch.setattr(Hub, "start_reading", lambda self: seen.append(sys.getswitchinterval()))
    was = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        args = console_args("live", "--config", str(config), "--read-only")
        session, _ = console._open(args, load_config(config), 1.0)
        session.close()
    finally:
        sys.setswitchinterval(was)
    assert seen == [pytest.approx(console.SWITCH_INTERVAL_S)]


@pytest.mark.usefixtures("gc_restored", "no_config")
def test_the_demo_switches_threads_often_before_its_first_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Textual's writer thread puts the first frame on the terminal behind the driver's
    start-up writes, each a turn for the interpreter while the UI thread is busy: quick
    turns from before the App runs, not from after its first frame."""
    seen: list[float] = []
    monkeypatch.setattr(GpuconApp, "run", lambda app, *a, **k: seen.append(sys.getswitchinterval()))
    sys.setswitchinterval(0.005)
    assert main(["demo"]) == 0
    assert seen == [pytest.approx(console.SWITCH_INTERVAL_S)]


def console_args(*argv: str) -> argparse.Namespace:
    from gpucon.commands.cli import build_parser

    return build_parser(list(argv)).parse_args(list(argv))
