"""The process ``gpucon serve`` starts for each browser: the NOC wall, read-only by construction.

textual-serve runs one shell command per browser connection. That command is this module,
never ``gpucon live``: its command line has no ``--read-only`` to leave out and no option that
could turn read-only off. It always opens the session read-only (``Session`` then holds no
controls factory, so no writer can be built) in NOC mode; a config's ``read_only = false`` or
``GPUCON_READ_ONLY=0`` can only fail to add read-only, never remove it (both are OR-ed in).

The process ends when its server does: textual-serve stops it with a ``quit`` message when the
browser goes, and the console's terminal watch ends it when the server that started it is gone
(killed, crashed), so no wall process is left drawing for nobody.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path


def command_line(
    *,
    config: Path | None,
    fleet: str | None,
    demo: bool,
    page_seconds: float,
    refresh: float | None,
) -> str:
    """The shell command textual-serve runs per viewer (``exec``: the console is the shell's
    own process, so it knows its server as its parent)."""
    argv = [sys.executable, "-m", "gpucon.commands.served", "--page-seconds", str(page_seconds)]
    if config is not None:
        argv += ["--config", str(config)]
    if fleet is not None:
        argv += ["--fleet", fleet]
    if demo:
        argv.append("--demo")
    if refresh is not None:
        argv += ["--refresh", str(refresh)]
    return "exec " + shlex.join(argv)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The console's options for a wall, with read-only and NOC fixed on."""
    parser = argparse.ArgumentParser(prog="gpucon-served")
    parser.add_argument("--config", default=None)
    parser.add_argument("--fleet", default=None)
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--page-seconds", type=float, default=10.0)
    parser.add_argument("--refresh", type=float, default=None)
    own = parser.parse_args(list(argv))
    return argparse.Namespace(
        command="demo" if own.demo else "live",
        config=own.config,
        fleet=own.fleet,
        read_only=True,  # fixed: nothing on this command line or in the config unsets it
        noc=True,
        theme=None,  # the NOC theme
        refresh=own.refresh,
        page_seconds=own.page_seconds,
        seed=7,
        scenario=None,
        size=None,
        record=None,  # a wall records nothing: `gpucon record` does that on its own
        served_by=os.getppid(),  # the server: when it is gone, so is this console
    )


def main(argv: Sequence[str] | None = None) -> int:
    # belt and braces: a config loaded below sees read-only from the environment as well
    os.environ["GPUCON_READ_ONLY"] = "1"
    args = parse(sys.argv[1:] if argv is None else argv)
    from gpucon.commands import console
    from gpucon.config import ConfigError

    try:
        return console.run(args)
    except ConfigError as exc:  # checked by ``gpucon serve`` at start; changed since
        print(f"gpucon: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
