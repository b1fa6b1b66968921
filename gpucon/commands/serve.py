"""``gpucon serve``: the NOC wall in a browser, through textual-serve.

Each browser that opens the page gets its own console process (``gpucon.commands.served``),
always read-only and in NOC mode: no controls exist in it, whatever the config says. None of
them reads the fleet: the server reads it once, in one shared hub, and every viewer follows
what that hub records (``serve_hub.py``). The
server binds loopback unless told otherwise; bound anywhere else it says loudly that anyone who
reaches the port sees the fleet (the README shows a reverse proxy with authentication).

The config is loaded and checked here once, at start, so a bad one is a message and exit 2,
not a page that never draws.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

DEFAULT_PORT = 8080
DEFAULT_MAX_VIEWERS = 4
MAX_VIEWERS_LIMIT = 64  # each viewer is a whole console process (~70 MB)


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; anything else is warned about)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--demo", action="store_true", help="serve the built-in simulated fleet instead"
    )
    parser.add_argument(
        "--max-viewers",
        type=int,
        metavar="N",
        default=DEFAULT_MAX_VIEWERS,
        help=f"browsers served at once, one console process each (default "
        f"{DEFAULT_MAX_VIEWERS}); the next one is told the wall is full",
    )
    parser.add_argument(
        "--allow-origin",
        metavar="URL",
        action="append",
        default=[],
        help="a web origin that may show the wall besides its own address, e.g. your reverse "
        "proxy's https://wall.example.org (repeatable)",
    )
    parser.add_argument(
        "--page-seconds",
        type=float,
        metavar="S",
        default=10.0,
        help="seconds each wall page stays up (default 10)",
    )
    parser.add_argument(
        "--refresh",
        type=float,
        metavar="S",
        default=None,
        help="seconds between screen updates (default: config [ui] refresh_s, or 1)",
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (a loopback address or ``localhost``)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int) -> list[str]:
    """The lines printed when the wall is reachable from other machines (none on loopback)."""
    if is_loopback(host):
        return []
    bar = "!" * 78
    return [
        bar,
        f"gpucon serve: listening on {host}:{port}, NOT loopback. Anyone who can reach this",
        "port sees the whole fleet (names, addresses, queues, alerts) with no login. The wall",
        "is read-only, but what it shows is yours: put a reverse proxy with authentication",
        "and TLS in front of it (README: 'The wall in a browser') and bind 127.0.0.1.",
        bar,
    ]


def _check(args: argparse.Namespace) -> str | None:
    """A usage problem with the options, or None."""
    from gpucon.commands.serve_origin import OriginPolicy
    from gpucon.config.checks import MAX_DURATION_S, MIN_REFRESH_S
    from gpucon.errors import BadParams, finite_number

    try:
        OriginPolicy.build(loopback_only=True, allow_origins=args.allow_origin)
    except ValueError as exc:
        return str(exc)

    if not 1 <= args.max_viewers <= MAX_VIEWERS_LIMIT:
        return f"--max-viewers must be between 1 and {MAX_VIEWERS_LIMIT}, got {args.max_viewers}"
    if not 0 <= args.port <= 65535:
        return f"--port must be between 0 and 65535, got {args.port}"
    try:
        finite_number("--page-seconds", args.page_seconds, minimum=1.0, maximum=MAX_DURATION_S)
        if args.refresh is not None:
            finite_number("--refresh", args.refresh, minimum=MIN_REFRESH_S, maximum=MAX_DURATION_S)
    except BadParams as exc:
        return str(exc)
    return None


def _fleet_title(args: argparse.Namespace) -> str:
    """The page's title; loading the config here also refuses a bad one before serving."""
    from gpucon.commands.console import _load_config
    from gpucon.errors import Refused

    as_console = argparse.Namespace(**vars(args))
    as_console.command = "demo" if args.demo else "live"
    config = _load_config(as_console)
    if args.demo:
        return "gpucon wall: simulated fleet"
    if not config.fleet.sources_named():
        raise Refused(f"fleet {config.fleet.name!r} names no source; see gpucon config")
    return f"gpucon wall: {config.fleet.name}"


def run(args: argparse.Namespace) -> int:
    problem = _check(args)
    if problem is not None:
        print(f"gpucon serve: {problem}", file=sys.stderr)
        return 2
    from gpucon.errors import Refused

    try:
        title = _fleet_title(args)
    except Refused as exc:
        print(f"gpucon serve: {exc}", file=sys.stderr)
        return 2
    from gpucon.commands.serve_hub import SharedWall

    # one reader of the fleet for every viewer: each follows what it records
    with SharedWall(args) as wall:
        return _serve(args, title, wall.path)


def _serve(args: argparse.Namespace, title: str, follow: Path) -> int:
    from gpucon.commands.serve_origin import OriginPolicy
    from gpucon.commands.serve_web import WallServer
    from gpucon.commands.served import command_line

    command = command_line(
        config=Path(args.config) if args.config else None,
        fleet=args.fleet,
        demo=args.demo,
        page_seconds=args.page_seconds,
        refresh=args.refresh,
        follow=follow,
    )
    where = f"http://{args.host}:{args.port}/"
    if ":" in args.host:
        where = f"http://[{args.host.strip('[]')}]:{args.port}/"
    banner = [
        *exposure_warning(args.host, args.port),
        f"gpucon serve: the NOC wall, read-only, on {where} "
        f"(at most {args.max_viewers} viewers; Ctrl+C stops)",
    ]
    for line in banner[:-1]:  # said before anything can fail to bind
        print(line, file=sys.stderr, flush=True)
    server = WallServer(
        command,
        host=args.host,
        port=args.port,
        max_viewers=args.max_viewers,
        title=title,
        policy=OriginPolicy.build(
            loopback_only=is_loopback(args.host), allow_origins=args.allow_origin
        ),
        banner=banner[-1:],
    )
    try:
        server.serve()
    except OSError as exc:  # the port is taken, the address is not ours
        print(f"gpucon serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    return 0
