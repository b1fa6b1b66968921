"""The process ``gpucon serve`` starts for each browser: the NOC wall, read-only by construction.

textual-serve runs one shell command per browser connection. That command is this module,
never ``gpucon live``: its command line has no ``--read-only`` to leave out and no option that
could turn read-only off. It always opens the session read-only (``Session`` then holds no
controls factory, so no writer can be built) in NOC mode; a config's ``read_only = false`` or
``GPUCON_READ_ONLY=0`` can only fail to add read-only, never remove it (both are OR-ed in).

With ``--follow FILE`` (what ``gpucon serve`` gives every viewer) the console reads nothing of
the fleet itself: it follows the file the server's one shared hub records
(``commands/serve_hub.py``, ``recording/follow.py``), so N viewers cost the fleet one reader.

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
    follow: Path | None = None,
) -> str:
    """The shell command textual-serve runs per viewer (``exec``: the console is the shell's
    own process, so it knows its server as its parent)."""
    argv = [sys.executable, "-m", "gpucon.commands.served", "--page-seconds", str(page_seconds)]
    if follow is not None:
        argv += ["--follow", str(follow)]
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
    parser.add_argument("--follow", default=None)
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
        follow=own.follow,
    )


def main(argv: Sequence[str] | None = None) -> int:
    # belt and braces: a config loaded below sees read-only from the environment as well
    os.environ["GPUCON_READ_ONLY"] = "1"
    args = parse(sys.argv[1:] if argv is None else argv)
    from gpucon.commands import console
    from gpucon.config import ConfigError

    try:
        if args.follow:
            return follow(args)
        return console.run(args)
    except ConfigError as exc:  # checked by ``gpucon serve`` at start; changed since
        print(f"gpucon: {exc}", file=sys.stderr)
        return 2


def follow(args: argparse.Namespace) -> int:
    """The wall on the server's shared recording: read-only, NOC, no source of its own."""
    from gpucon.app import GpuconApp
    from gpucon.commands.console import _load_config
    from gpucon.commands.hangup import HANGUP_EXIT, TerminalWatch
    from gpucon.recording.follow import FollowFeed
    from gpucon.recording.store import RecordingStore

    config = _load_config(args)
    store = RecordingStore(Path(args.follow), readonly=True)
    feed = FollowFeed(store)
    try:
        app = GpuconApp(
            feed,
            mode=args.command,
            read_only=True,
            noc=True,
            theme=None,
            keys=config.ui.keys,
            fleet_name=config.fleet.name if args.command == "live" else "simulated",
            default_slo_ms=config.alerts.default_slo_p95_ms,
            page_s=args.page_seconds,
        )

        def quit() -> None:
            app.call_from_thread(app.exit, None, HANGUP_EXIT)

        watch = TerminalWatch(lambda why: None, quit, parent_pid=args.served_by).start()
        try:
            app.run()
        finally:
            watch.close()
            feed.stop()
    finally:
        store.close()
    return app.return_code or 0


if __name__ == "__main__":
    sys.exit(main())
