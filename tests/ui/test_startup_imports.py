"""What the console imports before its first frame: nothing it does not draw with.

Start-up time is mostly imports (benchmarks/RESULTS.md, "Console start-up"): one top-level
import of a client library or of the write side in a module the first frame needs would add
tens of milliseconds to every start, and nothing else would notice. Each test starts the real
``gpucon`` command (``cli.main``: parser, config, session, first snapshot, the App) in a fresh
interpreter, lets the App draw its first frame headless, and lists what was imported when
that frame was handed to the terminal (``App._display``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """\
import asyncio, json, sys
from gpucon.app import GpuconApp

loaded = []
display = GpuconApp._display

def first_display(self, screen, renderable):
    if renderable is not None and not loaded:  # the first frame: what it was drawn with
        loaded.extend(sys.modules)
    return display(self, screen, renderable)

def run(self, *args, **kwargs):
    async def first_frame():
        async with self.run_test(size=(180, 50)) as pilot:
            await pilot.pause()
    asyncio.run(first_frame())

GpuconApp._display = first_display
GpuconApp.run = run  # the same App, drawn headless: the command's own path up to here
from gpucon.commands.cli import main
main(sys.argv[1:])
print(json.dumps(sorted(loaded)))
"""

# client libraries (and what they pull in), the recording's SQLite, the config file's parsers
NEVER = (
    *("kubernetes", "redis", "hiredis", "httpx", "httpcore", "aiohttp", "yaml", "paramiko"),
    *("prometheus_api_client", "pandas", "numpy", "requests", "jinja2", "textual_serve"),
    *("libvirt", "sqlite3"),
    # gpucon's write side, recordings, other screens and commands: built or opened later
    *("gpucon.recording", "gpucon.controls", "gpucon.registry", "gpucon.lab", "gpucon.actions"),
    *("gpucon.sim.registry", "gpucon.sim.probe", "gpucon.sim.mig", "gpucon.sim.mps"),
    # the bottom's panels: mounted, and imported, once the first frame is drawn
    *("gpucon.widgets.panels", "gpucon.widgets.health_panel", "gpucon.widgets.alert_lines"),
)
# packages of which only these modules may be loaded by the first frame
ONLY = {
    "gpucon.screens": {"gpucon.screens", "gpucon.screens.fleet"},
    "gpucon.commands": {
        *("gpucon.commands", "gpucon.commands.cli", "gpucon.commands.console"),
        "gpucon.commands.hangup",
        "gpucon.commands.gc_pace",  # the console's collector settings (a few lines)
    },
}


def first_frame_modules(tmp_path: Path, *argv: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCON_") and k != "PYTHONPATH"}
    env.update(
        PYTHONPATH=str(ROOT),
        XDG_CONFIG_HOME=str(tmp_path / "config"),  # no config file: the demo's defaults
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    names: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "gpucon.screens.fleet" in names  # the first frame was drawn
    return set(names)


def too_early(loaded: set[str], never: tuple[str, ...] = NEVER) -> list[str]:
    bad = [m for m in loaded if any(m == n or m.startswith(n + ".") for n in never)]
    for package, allowed in ONLY.items():
        bad += [m for m in loaded if m.startswith(package + ".") and m not in allowed]
    return sorted(bad)


def test_the_demo_draws_its_first_frame_without_the_write_side_or_any_client(
    tmp_path: Path,
) -> None:
    loaded = first_frame_modules(tmp_path, "demo")
    # the demo reads no config file and no real source
    assert too_early(loaded, (*NEVER, "tomllib", "pynvml", "gpucon.sources.nvml")) == []


def test_a_live_nvml_console_loads_no_client_of_a_source_it_does_not_use(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'fleet = "local"\nread_only = true\n\n[fleets.local.nvml]\nhost = ""\ntimeout_s = 2.0\n'
        "cadence_s = 60.0\n"  # no second read (made in this process) before the check
    )
    loaded = first_frame_modules(tmp_path, "live", "--config", str(config), "--read-only")
    assert "gpucon.sources.forked_first_read" in loaded
    # nor the Redis and Prometheus connection helpers: its config checks need none of them;
    # nor NVML's own source and pynvml: the first read is made in a child process
    # (gpucon.sources.forked_first_read), the console's own source is built on the second
    nvml = ("gpucon.sources.nvml", "gpucon.sources.nvml_calls", "pynvml", "ctypes")
    assert too_early(loaded, (*NEVER, "gpucon.sources.connect", *nvml)) == []


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """The checker itself: a client library or another screen loaded early is named."""
    loaded = {"gpucon.app", "redis.client", "gpucon.screens.detail", "gpucon.screens.fleet"}
    assert too_early(loaded) == ["gpucon.screens.detail", "redis.client"]
