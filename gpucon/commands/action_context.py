"""Where the action verbs plan and act: the configured fleet's registry, or a simulated fleet.

``LiveContext`` reads the registry over its own read-only connection (``gpucon-cli-read``) and
builds the Controls only when the plan is confirmed; ``DemoContext`` runs a simulated fleet in
the background for ``--demo``. Imported by ``gpucon.commands.actions`` only when a verb runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpucon.config import ConfigError, ConfigMissing, GpuconConfig, load_config
from gpucon.errors import BadParams, Refused


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


class LiveContext:
    """The configured fleet: a read-only registry connection to plan on, controls to apply."""

    def __init__(self, args: argparse.Namespace, read_only: bool) -> None:
        import redis

        self.config = load_config_for(args)
        self.read_only = read_only or bool(getattr(self.config, "read_only", False))
        fleet = self.config.fleet
        if fleet.redis is None:
            raise Refused(f"fleet {fleet.name!r} has no [redis] section: no registry to act on")
        self.has_kube = fleet.kube is not None
        self.client = redis.Redis.from_url(
            fleet.redis.url,
            decode_responses=True,
            socket_timeout=fleet.redis.timeout_s,
            socket_connect_timeout=fleet.redis.timeout_s,
            client_name="gpucon-cli-read",
        )

    def read(self, *, full: bool = False) -> tuple[Any, int]:
        """The registry as a Snapshot and its version; ``full``: every configured source.

        A full read (for rebalance proposals: latency, slots and their SM counts) goes through
        the fleet's sources once. The version is read first, so a write in between makes the
        plan look stale (refused, safe) rather than fresh.
        """
        from dataclasses import replace

        from gpucon.actions.registry_snapshot import read_registry

        registry, version = read_registry(self.client)
        if not full:
            return registry, version
        from gpucon.sources.factory import build_hub

        hub = build_hub(self.config)
        try:
            hub.poll_once()
            snapshot = hub.tick()
        finally:
            hub.stop()
        if not snapshot.backends:  # the Redis source could not be read: plan on the registry
            snapshot = replace(snapshot, backends=registry.backends)
        return snapshot, version

    def controls(self) -> Any:
        from gpucon.controls.base import build_controls

        return build_controls(self.config, self.read_only)

    def close(self) -> None:
        self.client.close()


class DemoContext:
    """A simulated fleet, advanced in the background so in-flight work drains."""

    has_kube = False

    def __init__(self, args: argparse.Namespace) -> None:
        self.read_only = bool(
            getattr(load_config_for(args, allow_missing=True), "read_only", False)
        )
        from gpucon.sim.runner import DemoFleetRunner

        self.args = args
        self.runner = DemoFleetRunner.start()

    def read(self, *, full: bool = False) -> tuple[Any, int]:
        return self.runner.snapshot(), self.runner.fleet.registry_version()

    def controls(self) -> Any:
        from gpucon.controls.base import audit_path_for
        from gpucon.sim.registry import build_sim_controls

        config = load_config_for(self.args, allow_missing=True)
        read_only = bool(self.args.read_only or self.args.noc)
        return build_sim_controls(
            self.runner.fleet,
            read_only=read_only,
            audit_path=audit_path_for(config),
            operator=config.operator,
        )

    def close(self) -> None:
        self.runner.stop()
