"""Where the action verbs plan and act: a session on the configured fleet or a simulated one.

``verb_session(args)`` opens the session a verb runs in (``gpucon.session`` builds it, as it
does for the console): the live fleet's registry to plan on and controls built only once the
plan is confirmed, or, with ``--demo``, a simulated fleet kept moving in the background.
Imported by ``gpucon.commands.actions`` only when a verb runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gpucon.config import ConfigError, ConfigMissing, GpuconConfig, load_config
from gpucon.errors import BadParams

if TYPE_CHECKING:
    from gpucon.session import Session


def load_config_for(args: argparse.Namespace, *, allow_missing: bool = False) -> GpuconConfig:
    """The config the verb runs with; BadParams naming ``config`` when it is wrong or missing."""
    try:
        return load_config(Path(args.config) if args.config else None, fleet=args.fleet)
    except ConfigMissing:
        if allow_missing:  # the defaults, with the GPUCON_* variables still applied
            import os

            from gpucon.config.env import apply_env

            try:
                return apply_env(GpuconConfig(), os.environ)
            except ConfigError as error:
                raise BadParams("config", str(error)) from None
        raise BadParams("config", "no config file; see gpucon config") from None
    except ConfigError as error:
        raise BadParams("config", str(error)) from None


def verb_session(args: argparse.Namespace) -> Session:
    """The session a verb plans and acts in; read-only with ``--read-only``/``--noc`` or when
    the config says so (then it has no controls at all)."""
    from gpucon.session import DemoOptions, open_session

    demo = bool(getattr(args, "demo", False))
    config = load_config_for(args, allow_missing=demo)
    read_only = bool(args.read_only or args.noc)
    return open_session(config, demo=DemoOptions() if demo else None, read_only=read_only)
