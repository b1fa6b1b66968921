"""``gpucon live`` and ``gpucon demo``: build the hub, then run the TUI on it.

Only the standard library is imported at module level (``gpucon --help`` stays fast); the
simulator, the config loader, the sources and Textual are imported inside ``run``.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from gpucon.commands import gc_pace

if TYPE_CHECKING:
    from gpucon.app import GpuconApp
    from gpucon.config import GpuconConfig
    from gpucon.recording.recorder import Recorder
    from gpucon.session import Session
    from gpucon.session.record import NotRecording


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument(
        "--refresh",
        type=float,
        metavar="S",
        default=None,
        help="seconds between screen updates (default: config [ui] refresh_s, or 1)",
    )
    parser.add_argument(
        "--page-seconds",
        type=float,
        metavar="S",
        default=10.0,
        help="--noc: seconds each page (table pages, then alerts) stays up (default 10)",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        default=None,
        help="record every snapshot to FILE (gpucon replay FILE); on an existing recording "
        "of this fleet, the plots start filled from it",
    )
    if command_name == "demo":
        parser.add_argument("--seed", type=int, default=7, help="simulator seed (default 7)")
        parser.add_argument(
            "--scenario",
            metavar="NAME",
            default=None,
            help="start a named incident (burst, noisy-neighbour, ...)",
        )
        parser.add_argument(
            "--size",
            type=int,
            metavar="N",
            default=None,
            help="simulate N GPUs (up to 2048) instead of the default fleet",
        )


def _fail(message: str) -> NoReturn:
    """A usage error: say what is wrong and exit 2, before anything starts."""
    from gpucon.redact import redact

    print(redact(message), file=sys.stderr)
    raise SystemExit(2)


def _seconds(option: str, value: float, minimum: float) -> float:
    """``value`` when it is a finite number of seconds in [``minimum``, a day]; otherwise a
    usage error naming the option, the value and the range (``nan`` and ``1e308`` included:
    either would leave the screen frozen after its first frame)."""
    from gpucon.config.checks import MAX_DURATION_S
    from gpucon.errors import BadParams, finite_number

    try:
        return finite_number(f"{option} (seconds)", value, minimum=minimum, maximum=MAX_DURATION_S)
    except BadParams as exc:
        _fail(f"gpucon: {exc}")


def _refresh(args: argparse.Namespace, configured: float) -> float:
    from gpucon.config.checks import MIN_REFRESH_S

    if args.refresh is None:
        return _seconds("ui.refresh_s", configured, MIN_REFRESH_S)
    return _seconds("--refresh", args.refresh, MIN_REFRESH_S)


def _load_config(args: argparse.Namespace) -> GpuconConfig:
    from pathlib import Path

    from gpucon.config import ConfigError, ConfigMissing, GpuconConfig, load_config

    try:
        return load_config(Path(args.config) if args.config else None, fleet=args.fleet)
    except ConfigMissing:
        if args.command == "demo":  # the demo needs no setup; GPUCON_* variables still apply
            import os

            if not any(name.startswith("GPUCON_") for name in os.environ):
                return GpuconConfig()
            from gpucon.config.env import apply_env

            try:
                return apply_env(GpuconConfig(), os.environ)
            except ConfigError as exc:
                _fail(f"gpucon: {exc}")
        raise
    except ConfigError as exc:
        _fail(f"gpucon: {exc}")


def _open(
    args: argparse.Namespace, config: GpuconConfig, refresh_s: float
) -> tuple[Session, Recorder | NotRecording | None]:
    """The session the console runs on and its recorder (``--record``); a usage error when
    the session cannot be opened. A recording that cannot be opened is not one: the console
    starts without it (``NotRecording``: its badge says REC FAILED and why)."""
    from gpucon.errors import Refused
    from gpucon.session import DemoOptions, open_session

    read_only = bool(args.read_only or args.noc)
    demo = DemoOptions(args.seed, args.scenario, args.size) if args.command == "demo" else None
    try:
        # a live fleet's NVML source makes its first read in a child process: importing
        # pynvml and initialising NVML there run beside this process's UI imports, not in
        # turns with them (gpucon.sources.forked_first_read)
        session = open_session(
            config,
            demo=demo,
            read_only=read_only,
            refresh_s=refresh_s,
            fork_first_nvml_read=True,
        )
    except ValueError as exc:  # unknown scenario, size out of range
        _fail(f"gpucon demo: {exc}")
    except Refused as exc:
        _fail(f"gpucon: {exc}")
    recorder: Recorder | NotRecording | None = None
    if args.record:
        from pathlib import Path

        from gpucon.recording.store import RecordingError
        from gpucon.session.record import NotRecording, start_recording

        path = Path(args.record)
        try:  # before the demo's first tick: restored history comes before it
            recorder = start_recording(session, path, demo=demo)
        except (RecordingError, OSError) as exc:
            # the console matters more than its recording: it starts, and says REC FAILED
            # with the reason (on screen once, and on the terminal when it exits)
            if not isinstance(exc, RecordingError):
                exc = RecordingError(f"{path}: {exc}", exc.strerror)
            recorder = NotRecording(path, exc)
    # from here on a thread that wants the interpreter waits at most 1 ms for it, not
    # Python's 5 ms: a live fleet's first reads run in the hub's workers while the UI is
    # imported, and each NVML call gives the interpreter up and waits for it back (at 5 ms
    # the first read's ~40 calls waited 5 ms each behind the imports); and Textual's writer
    # thread puts the first frame on the terminal behind the driver's ~20 start-up writes,
    # waiting for the interpreter after each while the UI thread builds the frame and then
    # mounts the bottom's panels (at 5 ms the demo's frame reached the terminal 8 ms after
    # it was drawn, median; benchmarks/RESULTS.md, "Sixth round")
    _switch_often()
    if demo is not None:
        # the simulator answers in well under a millisecond: the first frame can show data
        session.hub.poll_once()
        session.hub.tick()
    else:
        # a live fleet's first reads (NVML's initialisation, first connections) run in the
        # hub's workers while the UI is imported and built, not after the first frame
        session.hub.start_reading()
    return session, recorder


def _watch_recorder(app: GpuconApp, recorder: Recorder | NotRecording) -> None:
    """Say once, on screen, if the recording stops (a full disk, the file removed) or never
    started (the file could not be opened for writing)."""
    told: list[str] = []

    def check() -> None:
        if recorder.error and not told:
            told.append(recorder.error)
            app.notify(recorder.error, title="gpucon --record", severity="error", markup=False)

    check()
    app.set_interval(2.0, check)


def run(args: argparse.Namespace) -> int:
    """The console, with Python's cyclic garbage collector off until its first frame.

    Starting allocates a few hundred thousand long-lived objects (Textual's modules, classes,
    styles, widgets) and frees next to none; the collector's ~100 passes over them took
    ~10 ms of ``gpucon demo``'s start-up (measured with ``gc.callbacks``). It is back on
    once the first frame is drawn, or when the console could not start.
    """
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return _run(args, _collector_on if gc_was_on else None)
    finally:
        if gc_was_on:
            gc.enable()


# how long a thread that wants the interpreter waits for the one running before asking it
# to let go (Python's default is 5 ms)
SWITCH_INTERVAL_S = 0.001


def _switch_often() -> None:
    """From the session's opening (``_open``) on: a key passes through three threads (the
    terminal's input thread, the UI's, Textual's writer) and each waits for the interpreter
    while the hub's thread or a source read runs Python between two of its ``give_way``
    points; at Python's 5 ms a key could wait 15-20 ms for its turns alone. Switching costs
    a few microseconds, and only while two threads both run Python."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def _collector_on() -> None:
    """After the first frame: what start-up built lives as long as the console, so it moves
    to the collector's permanent generation (``gc.freeze``) and full passes walk only what
    the ticks allocate, not Textual's modules, styles and widgets again and again. The hub's
    thread runs the young passes between ticks (``gc_pace``); the automatic threshold is a
    backstop."""
    gc.freeze()
    gc.set_threshold(gc_pace.BACKSTOP_YOUNG, gc_pace.MIDDLE_THRESHOLD, gc_pace.OLD_THRESHOLD)
    gc.enable()


# the longest a live console's first frame waits, from the start of the first reads, for all
# of them to answer (NVML's initialisation takes a few hundred ms); a source slower than that
# shows on the first tick after the frame
FIRST_DATA_WAIT_S = 0.5


def _run(args: argparse.Namespace, after_first_frame: Callable[[], None] | None) -> int:
    config = _load_config(args)
    refresh_s = _refresh(args, config.ui.refresh_s)
    _seconds("--page-seconds", args.page_seconds, 1.0)
    from gpucon.config.keys import key_collisions

    for collision in key_collisions(config.ui.keys)[:1]:
        _fail(f"gpucon: {collision}")
    session, recorder = _open(args, config, refresh_s)
    try:  # a live session's first reads are under way: closed however the console ends
        return _console(args, config, session, recorder, after_first_frame)
    finally:
        session.close()
        if recorder is not None:
            recorder.close()
            if recorder.error:  # said on screen; said again where the terminal keeps it
                from gpucon.redact import redact

                print(f"gpucon: --record: {redact(recorder.error)}", file=sys.stderr)


def _console(
    args: argparse.Namespace,
    config: GpuconConfig,
    session: Session,
    recorder: Recorder | NotRecording | None,
    after_first_frame: Callable[[], None] | None,
) -> int:
    """The App on an open session, run until it exits; its exit code."""
    from gpucon.app import GpuconApp

    if not session.demo:
        # the first reads ran while Textual loaded: when they are in (or come in soon) the
        # first frame shows data, as a monitor that reads before it draws would
        session.hub.tick_if_read(within_s=FIRST_DATA_WAIT_S)

    # the demo's controls are built a second after start or on the first action key: they
    # touch no network, and importing them (the probe's HTTP client among them) would cost
    # more than a third of the demo's start-up. A live fleet's are built now, so that a
    # Redis URL that cannot work is said at once.
    controls = None
    why_not = None
    if not session.read_only and not session.demo:
        try:
            controls = session.controls()
        except Exception as exc:  # no registry configured, Redis URL refused, ...
            why_not = f"actions are off: {exc}"
    app = GpuconApp(
        session.hub,
        mode="demo" if session.demo else "live",
        read_only=session.read_only,
        noc=bool(args.noc),
        theme=args.theme or (None if args.noc else config.ui.theme),
        keys=config.ui.keys,
        controls=controls,
        controls_factory=session.controls if session.demo and not session.read_only else None,
        fleet_name=session.fleet_name,
        default_slo_ms=config.alerts.default_slo_p95_ms,
        page_s=args.page_seconds,
        config=config,
        recording=None if recorder is None else recorder.status,
    )
    if why_not:
        app.startup_problems.append(why_not)
    if not session.demo:
        from gpucon.config.credentials import credential_warnings

        app.startup_problems.extend(credential_warnings(config))
    if after_first_frame is not None:
        app.after_first_frame.append(after_first_frame)
        session.hub.between_ticks = gc_pace.collect_unless(lambda: app.key_within(gc_pace.TYPING_S))
    if recorder is not None:
        app.after_first_frame.append(lambda: _watch_recorder(app, recorder))
    from gpucon.commands.hangup import HANGUP_EXIT, TerminalWatch

    def stop_actions(why: str) -> None:
        """From the watch's thread: each running action stops at its next step boundary,
        records its outcome and releases its locks; no new one starts. (Imported here, not
        before the first frame: the console's actions import it when they run.)"""
        from gpucon.actions import stop

        stop.request_stop(f"the console is closing: {why}")
        stop.wait_idle(3.0)

    def quit() -> None:
        app.call_from_thread(app.exit, None, HANGUP_EXIT)

    # a console served to a browser (gpucon serve) ends with its server
    watch = TerminalWatch(stop_actions, quit, parent_pid=getattr(args, "served_by", None)).start()
    try:
        app.run()
    finally:
        watch.close()
    return app.return_code or 0
