"""``gpucon live`` and ``gpucon demo``: build the hub, then run the TUI on it.

Only the standard library is imported at module level (``gpucon --help`` stays fast); the
simulator, the config loader, the sources and Textual are imported inside ``run``.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable
from typing import Any, NoReturn


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
            help="simulate N GPUs (up to 512) instead of the default fleet",
        )


def _fail(message: str) -> NoReturn:
    """A usage error: say what is wrong and exit 2, before anything starts."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def _refresh(args: argparse.Namespace, configured: float) -> float:
    refresh = args.refresh if args.refresh is not None else configured
    if refresh <= 0:
        _fail("gpucon: --refresh must be a positive number of seconds")
    return float(refresh)


def _optional(module_name: str) -> Any:
    """A module of gpucon that may not be built yet, or None."""
    import importlib

    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return None
        raise


def _demo_hub(args: argparse.Namespace, refresh_s: float, config_slo: dict[str, float]) -> Any:
    import importlib

    from gpucon.hub import Hub

    sim = _optional("gpucon.sources.sim")
    if sim is None:
        print("gpucon demo: the simulator is not available in this build", file=sys.stderr)
        raise SystemExit(2)
    try:
        source = sim.SimSource.for_demo(args.seed, args.scenario, args.size)
    except ValueError as exc:  # unknown scenario, size out of range
        _fail(f"gpucon demo: {exc}")
    slo = {**getattr(importlib.import_module("gpucon.sim"), "DEMO_SLO_P95_MS", {}), **config_slo}
    hub = Hub([source], refresh_s=refresh_s, slo_p95_ms_by_model=slo)
    # the simulator answers in well under a millisecond: the first frame can show data
    hub.poll_once()
    hub.tick()
    return hub


def _load_config(args: argparse.Namespace) -> Any:
    from pathlib import Path

    from gpucon.config import ConfigError, ConfigMissing, GpuconConfig, load_config

    try:
        return load_config(Path(args.config) if args.config else None, fleet=args.fleet)
    except ConfigMissing:
        if args.command == "demo":  # the demo needs no setup; GPUCON_* variables still apply
            import os

            if not any(name.startswith("GPUCON_") for name in os.environ):
                return GpuconConfig()
            from gpucon.config_env import apply_env

            try:
                return apply_env(GpuconConfig(), os.environ)
            except ConfigError as exc:
                print(f"gpucon: {exc}", file=sys.stderr)
                raise SystemExit(2) from None
        raise
    except ConfigError as exc:
        print(f"gpucon: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _live_hub(config: Any, refresh_s: float) -> Any:
    from gpucon.hub import Hub

    factory = _optional("gpucon.sources.factory")
    if factory is None:
        print("gpucon live: no real sources in this build yet; try: gpucon demo", file=sys.stderr)
        raise SystemExit(2)
    sources = factory.build_sources(config.fleet)
    if not sources:
        print(
            f"gpucon: fleet {config.fleet.name!r} names no source; see gpucon config",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return Hub(
        sources,
        refresh_s=refresh_s,
        thresholds=config.alerts,
        slo_p95_ms_by_model=config.slo_p95_ms,
        liveness_policy=factory.liveness_policy(config.fleet),
    )


def _sim_controls(config: Any, hub: Any) -> Any:
    """The demo's write side: the simulated registry, audited like a real one."""
    from gpucon.controls.base import audit_path_for
    from gpucon.controls.sim_registry import build_sim_controls

    return build_sim_controls(
        hub.sources[0].fleet,
        read_only=False,
        audit_path=audit_path_for(config),
        operator=config.operator,
    )


def _controls(config: Any, hub: Any, demo: bool, read_only: bool) -> tuple[Any, str | None]:
    """The write side and, when it cannot be built, why. Read-only: never constructed.

    The demo's controls come back as a factory (``functools.partial``) that the app calls
    a second after it starts: they touch no network, and importing them (the probe's HTTP
    client among them) would cost more than a third of the demo's start-up.
    """
    if read_only:
        return None, None
    if demo:
        from functools import partial

        return partial(_sim_controls, config, hub), None
    if _optional("gpucon.controls.base") is None:
        return None, None
    try:
        from gpucon.controls.base import build_controls

        return build_controls(config, False), None
    except Exception as exc:  # no registry configured, Redis URL refused, ...
        return None, f"actions are off: {exc}"


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
        return _run(args, gc.enable if gc_was_on else None)
    finally:
        if gc_was_on:
            gc.enable()


def _run(args: argparse.Namespace, after_first_frame: Callable[[], None] | None) -> int:
    config = _load_config(args)
    refresh_s = _refresh(args, config.ui.refresh_s)
    if args.page_seconds <= 0:
        _fail("gpucon: --page-seconds must be a positive number of seconds")
    demo = args.command == "demo"
    hub = _demo_hub(args, refresh_s, config.slo_p95_ms) if demo else _live_hub(config, refresh_s)

    # --read-only, --noc, the config's read_only or GPUCON_READ_ONLY: any one of them is enough
    read_only = bool(args.read_only or args.noc or config.read_only)
    controls, why_not = _controls(config, hub, demo, read_only)

    from gpucon.app import GpuconApp

    app = GpuconApp(
        hub,
        mode="demo" if demo else "live",
        read_only=read_only,
        noc=bool(args.noc),
        theme=args.theme or (None if args.noc else config.ui.theme),
        keys=config.ui.keys,
        controls=None if demo else controls,
        controls_factory=controls if demo else None,
        fleet_name="simulated" if demo else config.fleet.name,
        default_slo_ms=config.alerts.default_slo_p95_ms,
        page_s=args.page_seconds,
        config=None if demo else config,
    )
    if why_not:
        app.startup_problems.append(why_not)
    if after_first_frame is not None:
        app.after_first_frame.append(after_first_frame)
    try:
        app.run()
    finally:
        hub.stop()
    return app.return_code or 0
