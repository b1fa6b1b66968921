"""The action verbs' parameters from their command lines, and the verbs' own arguments
(``gpucon reslice``'s layout and config file, ``gpucon rebalance``'s ``--set``), plus what only
the session knows (the MIG executor a re-slice uses, the MPS daemon a restart drives).

Each action's plan validates the params; this module only gathers them. Only the standard
library is imported at module level.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucon.session import Session

MAX_CONFIG_FILE_BYTES = 1_000_000


def add_reslice_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gpu", metavar="GPU", help="the GPU: host/gpuN (or its UUID)")
    parser.add_argument(
        "layout",
        metavar="LAYOUT",
        nargs="?",
        default=None,
        help="the new layout, e.g. 3g.40gb+2g.20gb+2x1g.10gb or 4g.40gb@0+1g.10gb@5",
    )
    parser.add_argument(
        "--config-file", metavar="FILE", default=None, help="a mig-parted config file (v1)"
    )
    parser.add_argument(
        "--config-name", metavar="NAME", default=None, help="the config in it to apply"
    )
    parser.add_argument(
        "--via",
        choices=("nvml", "nvidia-smi", "kubernetes"),
        default=None,
        help="how to apply it (default: the fleet's nvml.mig_executor)",
    )
    parser.add_argument(
        "--no-drain",
        action="store_true",
        help="refuse unless every backend on the GPU is drained already",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="seconds per wait (300)"
    )
    parser.add_argument(
        "--force", action="store_true", help="re-slice even when nothing else serves a model"
    )
    parser.add_argument("--reason", default=None, help="why (kept in the registry and audit)")


def _reslice_params(args: argparse.Namespace) -> dict[str, Any]:
    from gpucon.errors import BadParams

    params: dict[str, Any] = {"gpu": args.gpu, "timeout_s": args.timeout}
    params["drain"] = not args.no_drain
    params["force"] = bool(args.force)
    if args.reason is not None:
        params["reason"] = args.reason
    if args.config_name is not None:
        if args.layout is not None:
            raise BadParams("layout", "give a LAYOUT or --config-name, not both")
        params["config_name"] = args.config_name
        if args.config_file is not None:
            params["config_text"] = _read_config_file(args.config_file)
    elif args.layout is not None:
        params["layout"] = args.layout
    else:
        raise BadParams("layout", "give a LAYOUT (3g.40gb+2g.20gb+2x1g.10gb) or --config-name")
    if args.config_file is not None and args.config_name is None:
        raise BadParams("config_name", "--config-file needs --config-name")
    if args.via is not None:
        params["executor"] = args.via
    return params


def _read_config_file(path: str) -> str:
    from pathlib import Path

    from gpucon.errors import BadParams

    try:
        data = Path(path).expanduser().read_bytes()[: MAX_CONFIG_FILE_BYTES + 1]
    except OSError as exc:
        raise BadParams("config_file", f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_FILE_BYTES:
        raise BadParams("config_file", f"{path} is larger than {MAX_CONFIG_FILE_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def _parse_weights(items: list[str]) -> dict[str, object]:
    from gpucon.errors import BadParams, shown

    weights: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadParams("--set", f"expected NAME=WEIGHT, got {shown(item)}")
        weights[name.strip()] = value.strip()
    return weights


def params_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The action's params from the command line (validated by the action's plan)."""
    if args.command == "reslice":
        return _reslice_params(args)
    params: dict[str, Any] = {}
    if args.command in ("drain", "undrain"):
        params["node" if getattr(args, "node", False) else "backend"] = args.name
    if getattr(args, "reason", None) is not None:
        params["reason"] = args.reason
    if args.command in ("drain", "mps-restart"):
        params["timeout_s"] = args.timeout
        params["force"] = bool(args.force)
    if args.command == "mps-restart":
        params["target"] = args.target
    if args.command == "rebalance" and args.weights:
        params["weights"] = _parse_weights(args.weights)
    return params


def mig_executor(session: Session, asked: object) -> str:
    """The demo's own, the one asked for with --via, or the fleet's configured one."""
    if session.demo:
        return "simulated"
    if isinstance(asked, str):
        return asked
    nvml = session.config.fleet.nvml
    if nvml is not None:
        return nvml.mig_executor
    return "kubernetes" if session.config.fleet.kube is not None else "nvml"


def mps_params(session: Session, snapshot: Any, params: dict[str, Any]) -> None:
    """The daemon the target names, and the probe targets of its servers' backends (the
    config's; in the demo every server's backend, which the simulated prober serves)."""
    from gpucon.errors import BadParams, shown

    target = str(params.get("target"))
    daemon = session.mps_daemon_params(target)
    if daemon is None:
        known = ", ".join(session.mps_targets()) or "none configured"
        raise BadParams("target", f"no MPS daemon for {shown(target)} (known: {known})")
    params["daemon"] = daemon
    from gpucon.model.records import as_dict

    if not session.demo:
        params["probe_targets"] = [as_dict(t) for t in session.config.fleet.probe_targets]
        return
    servers = [str(s["backend"]) for s in daemon.get("servers") or ()]  # type: ignore[attr-defined]
    params["probe_targets"] = [
        {"name": b.name, "url": b.url or "http://simulated", "model": b.model or ""}
        for name in servers
        if (b := snapshot.backends.get(name)) is not None
    ]
