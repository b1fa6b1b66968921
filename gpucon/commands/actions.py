"""The action verbs: ``gpucon drain``, ``undrain``, ``rebalance``, ``reslice``, ``mps-restart``,
``probe`` and ``audit``.

Each verb plans on the registry as it is now, prints the plan, asks (on a terminal; without
one it refuses unless ``--yes``), then applies it under the guard (lock, audit) and prints
each step and the outcome. ``--dry-run`` prints the plan and stops; ``--json`` prints the plan
and the outcome as JSON on stdout (progress goes to stderr); ``--demo`` acts on a simulated
fleet instead of the configured one.

Exit codes:
  0  done (or, with --dry-run, the plan's preconditions pass)
  1  unexpected error (a system could not be reached, a bug)
  2  bad parameters: refused before any change; the message names the field
  3  refused: a precondition failed, the plan was stale, read-only mode, or not confirmed
  4  another operator holds the target's lock (the message says who, and since when)
  5  a step failed; the state it left is printed and in the audit log
  6  a step timed out (e.g. a drain with requests still in flight: the backend stays draining)

Only the standard library is imported at module level.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucon.actions.catalog import ApplyFn, PlanFn
    from gpucon.actions.plan import Progress
    from gpucon.config import GpuconConfig
    from gpucon.controls.audit_log import AuditRecord
    from gpucon.session import Session

from gpucon.registry import keys

EXIT_CODES_HELP = __doc__.split("Exit codes:")[1].split("Only the standard")[0]
# the audit log only reads: none of the verbs' refusals, locks or steps apply to it
AUDIT_EXIT_CODES_HELP = """
  0  the records were printed (none, if the log is empty)
  1  unexpected error (the stream's Redis could not be reached, a bug)
  2  bad parameters (--limit 0) or a bad config
"""
ACTION_VERBS = ("drain", "undrain", "rebalance", "reslice", "mps-restart")
MAX_CONFIG_FILE_BYTES = 1_000_000


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    codes = AUDIT_EXIT_CODES_HELP if command_name == "audit" else EXIT_CODES_HELP
    parser.epilog = "exit codes:" + codes
    if command_name == "audit":
        parser.add_argument("--json", action="store_true", help="one JSON object per line")
        parser.add_argument(
            "--limit", type=int, default=50, metavar="N", help="the newest N records (50)"
        )
        parser.add_argument(
            "--stream",
            action="store_true",
            help=f"read the fleet's Redis stream {keys.AUDIT} instead of this console's file",
        )
        parser.add_argument(
            "--all",
            action="store_true",
            help="this console's file and the fleet's stream merged by time, each marked with "
            "its origin (file, redis, file+redis) — what the audit screen shows",
        )
        parser.add_argument(
            "--demo", action="store_true", help="the demo's own audit file (audit-demo.jsonl)"
        )
        return
    if command_name in ("drain", "undrain"):
        parser.add_argument("name", metavar="NAME", help="the backend (or, with --node, node)")
        parser.add_argument("--reason", default=None, help="why (kept in the registry and audit)")
    if command_name == "drain":
        parser.add_argument(
            "--node", action="store_true", help="NAME is a Kubernetes node: drain all its backends"
        )
    if command_name == "mps-restart":
        parser.add_argument(
            "target",
            metavar="TARGET",
            help="the GPU, slot or VM whose MPS daemon to restart (a [[fleets.NAME.mps]] target)",
        )
        parser.add_argument("--reason", default=None, help="why (kept in the registry and audit)")
        parser.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            metavar="S",
            help="seconds to wait for in-flight work when draining (120)",
        )
        parser.add_argument(
            "--force", action="store_true", help="restart even if nothing else serves a model"
        )
    if command_name == "undrain":
        parser.add_argument(
            "--node",
            action="store_true",
            help="NAME is a Kubernetes node: uncordon it and undrain all its backends",
        )
    if command_name == "drain":
        parser.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            metavar="S",
            help="seconds to wait for in-flight work (120)",
        )
        parser.add_argument(
            "--force", action="store_true", help="drain even the last serving backend"
        )
    if command_name == "reslice":
        _add_reslice_arguments(parser)
    if command_name == "rebalance":
        parser.add_argument(
            "--set",
            dest="weights",
            action="append",
            default=[],
            metavar="NAME=W",
            help="set this weight (repeat); without it, weights are proposed from capacity",
        )
        parser.add_argument("--reason", default=None, help="why (kept in the registry and audit)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--json", action="store_true", help="print plan and outcome as JSON")
    parser.add_argument("--demo", action="store_true", help="act on a simulated fleet")


def _add_reslice_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gpu", metavar="GPU", help="the GPU: host/gpuN (or its UUID)")
    parser.add_argument(
        "layout",
        metavar="LAYOUT",
        nargs="?",
        default=None,
        help="the new layout, e.g. 2x3g.40gb+1x1g.10gb or 4g.40gb@0+1g.10gb@5",
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
        raise BadParams("layout", "give a LAYOUT (2x3g.40gb+1x1g.10gb) or --config-name")
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


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.command == "audit":
        return reported(args, lambda: _run_audit(args))
    return reported(args, lambda: _run_action(args))


def reported(args: argparse.Namespace, verb: Callable[[], int]) -> int:
    """Runs ``verb``; every refusal or failure to reach the fleet is one line on stderr and
    the exit code that names it, never a traceback."""
    from gpucon.errors import ActionError, ExitCode

    try:
        return verb()
    except ActionError as error:
        _err(_safe(f"gpucon {args.command}: {error}"))
        return int(error.exit_code)
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.ERROR)
    except (OSError, ConnectionError) as error:
        _err(_safe(f"gpucon {args.command}: cannot reach the fleet: {error}; nothing changed"))
        return int(ExitCode.ERROR)
    except Exception as error:
        if type(error).__module__.startswith("redis"):
            _err(_safe(f"gpucon {args.command}: Redis: {error}; nothing changed"))
            return int(ExitCode.ERROR)
        raise


def _load_config(args: argparse.Namespace, *, allow_missing: bool = False) -> GpuconConfig:
    from gpucon.commands.action_context import load_config_for

    return load_config_for(args, allow_missing=allow_missing)


def _run_audit(args: argparse.Namespace) -> int:
    """The newest records, oldest first; an intent that never got its outcome reads
    ``interrupted`` (or ``running`` while its operator still holds the target's lock)."""
    from gpucon.actions.audit import read_audit
    from gpucon.errors import BadParams

    if args.limit <= 0:
        raise BadParams("--limit", f"must be a positive number, got {args.limit}")
    if getattr(args, "all", False) and not args.demo:
        return _print_merged_audit(args)
    if args.stream and not args.demo:
        records = _read_stream(args)
    else:
        records = read_audit(_audit_file(args), args.limit)
    _print_records(args, records, [None] * len(records))
    return 0


def _audit_file(args: argparse.Namespace) -> Any:
    from gpucon.controls.base import audit_path_for, demo_audit_path

    config = _load_config(args, allow_missing=True)
    return demo_audit_path(config) if args.demo else audit_path_for(config)


def _print_records(args: argparse.Namespace, records: list[Any], origins: list[str | None]) -> None:
    from gpucon.actions.audit import run_statuses

    statuses = run_statuses(records, None if args.demo else _lock_holder(args))
    for record, origin, status in zip(records, origins, statuses, strict=True):
        if args.json:
            row = {**record.to_dict(), "status": status}
            print(json.dumps(row if origin is None else {**row, "origin": origin}))
        else:
            line = audit_line(record, status)
            print(line if origin is None else f"{origin:<10} {line}")


# (field, width in terminal cells) of each column of ``gpucon audit``; the text and the digest
# end the line, cut to their own widths
AUDIT_COLUMNS = (
    ("time", 23),
    ("fleet", 12),
    ("operator", 20),
    ("event", 8),
    ("action", 9),
    ("target", 24),
    ("step", 20),
    ("status", 11),
)
AUDIT_TEXT_WIDTH = 80


def audit_line(record: AuditRecord, status: str | None) -> str:
    """One audit record as a row whose columns hold their widths: every value escaped (control
    codes shown, not obeyed), cut to its column with an ellipsis, measured in terminal cells
    (a CJK character counts two)."""
    from gpucon.errors import format_ts
    from gpucon.widgets.safe_text import fit, pad

    values = {
        "time": format_ts(record.ts),
        "fleet": record.fleet or "?",
        "operator": record.operator,
        "event": record.event,
        "action": record.action,
        "target": record.target,
        "step": record.step,
        "status": record.status if status is None else status,
    }
    cells = [pad(_safe(str(values[name] or "")), width) for name, width in AUDIT_COLUMNS]
    cells.append(fit(_safe(record.text or ""), AUDIT_TEXT_WIDTH))
    if record.digest:
        cells.append(fit(f"[{_safe(record.digest)}]", 20))
    return "  ".join(cells).rstrip()


def _print_merged_audit(args: argparse.Namespace) -> int:
    from gpucon.actions.audit import merge_audit, read_audit

    local = read_audit(_audit_file(args), args.limit)
    entries = merge_audit(local, _read_stream(args), args.limit)
    _print_records(args, [e.record for e in entries], [e.origin for e in entries])
    return 0


def _lock_holder(args: argparse.Namespace) -> Callable[[str], str | None] | None:
    """Who holds a target's lock, read from the fleet's Redis (None: no Redis configured)."""
    from gpucon.actions.audit import lock_holders
    from gpucon.config.credentials import redis_client_for

    config = _load_config(args, allow_missing=True)
    if config.fleet.redis is None:
        return None
    client = redis_client_for(config.fleet.redis, client_name="gpucon-audit-read")
    return lock_holders(client)


def _read_stream(args: argparse.Namespace) -> list[Any]:
    from gpucon.actions.audit import records_from_rows
    from gpucon.config.credentials import redis_client_for
    from gpucon.controls.registry import read_audit_stream
    from gpucon.errors import Refused

    config = _load_config(args)
    if config.fleet.redis is None:
        raise Refused(f"fleet {config.fleet.name!r} has no [redis] section: no audit stream")
    client = redis_client_for(config.fleet.redis, client_name="gpucon-audit-read")
    try:
        rows = read_audit_stream(client, args.limit)
    finally:
        client.close()
    return records_from_rows(rows)


def _safe(text: str) -> str:
    """Fleet text on a terminal: control characters (escape sequences) shown, not obeyed;
    credentials (a URL's password in an error) masked."""
    from gpucon.redact import redact

    text = redact(text)
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _run_action(args: argparse.Namespace) -> int:
    from gpucon.actions.catalog import get_action
    from gpucon.commands.action_context import verb_session

    spec = get_action(args.command)
    params = params_from_args(args)
    session = verb_session(args)
    try:
        return run_planned(args, session, spec.plan, spec.apply, params, _ProgressPrinter())
    finally:
        session.close()


def run_planned(
    args: argparse.Namespace,
    session: Session,
    plan_fn: PlanFn,
    apply_fn: ApplyFn,
    params: dict[str, Any],
    progress: Progress,
) -> int:
    """Plan on the session's fleet, show the plan, confirm, apply under the guard, report.

    Refused before anything is built when the plan fails its preconditions, the session is
    read-only (it has no controls at all) or the operator does not confirm.
    """
    from gpucon.actions.guard import execute
    from gpucon.errors import ExitCode, Refused

    # a proposed rebalance needs what only the full sources know (latency, SM counts), and
    # so do a drain's headroom and an undrain's alerts; a node's backends are known only by
    # joining the registry with Kubernetes' pods
    # and a probe's defaults need the backend's observed service time
    full = args.command in ("drain", "undrain", "probe", "reslice", "mps-restart")
    full = full or "node" in params
    full = full or (args.command == "rebalance" and "weights" not in params)
    snapshot, version = session.planning_view(full=full)
    if args.command == "rebalance":
        params["registry_version"] = version
    if args.command == "reslice":
        params["executor"] = _mig_executor(session, params.get("executor"))
    if "node" in params:
        params["kube"] = session.config.fleet.kube is not None and not session.demo
    if args.command == "mps-restart":
        _mps_params(session, snapshot, params)
    plan = plan_fn(snapshot, params)
    _show_plan(plan, args.json)
    if args.dry_run:
        return int(ExitCode.OK if plan.ok else ExitCode.REFUSED)
    if not plan.ok:
        failed = "; ".join(f"{p.name}: {p.text}" for p in plan.failed_preconditions)
        raise Refused(f"precondition failed: {failed}")
    if session.controls_factory is None:  # read-only: refused before asking
        session.controls()
    if not args.yes:
        _confirm(plan)
    outcome = execute(apply_fn, plan, session.controls(), progress)
    _show_outcome(outcome, args.json)
    return int(outcome.exit_code)


def _mig_executor(session: Session, asked: object) -> str:
    """The demo's own, the one asked for with --via, or the fleet's configured one."""
    if session.demo:
        return "simulated"
    if isinstance(asked, str):
        return asked
    nvml = session.config.fleet.nvml
    if nvml is not None:
        return nvml.mig_executor
    return "kubernetes" if session.config.fleet.kube is not None else "nvml"


def _mps_params(session: Session, snapshot: Any, params: dict[str, Any]) -> None:
    """The daemon the target names, and the probe targets of its servers' backends (the
    config's; in the demo every server's backend, which the simulated prober serves)."""
    from gpucon.errors import BadParams, shown

    target = str(params.get("target"))
    daemon = session.mps_daemon_params(target)
    if daemon is None:
        known = ", ".join(session.mps_targets()) or "none configured"
        raise BadParams("target", f"no MPS daemon for {shown(target)} (known: {known})")
    params["daemon"] = daemon
    from dataclasses import asdict

    if not session.demo:
        params["probe_targets"] = [asdict(t) for t in session.config.fleet.probe_targets]
        return
    servers = [str(s["backend"]) for s in daemon.get("servers") or ()]  # type: ignore[attr-defined]
    params["probe_targets"] = [
        {"name": b.name, "url": b.url or "http://simulated", "model": b.model or ""}
        for name in servers
        if (b := snapshot.backends.get(name)) is not None
    ]


def _show_plan(plan: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"plan": plan.to_dict()}), flush=True)
        return
    from gpucon.actions.render import plan_lines

    for line in plan_lines(plan):
        print(_safe(line))


def _confirm(plan: Any) -> None:
    from gpucon.actions.plan import Tier
    from gpucon.errors import Refused

    if not sys.stdin.isatty():
        raise Refused("not confirmed: stdin is not a terminal (pass --yes to confirm)")
    if plan.tier >= Tier.DESTRUCTIVE:
        answer = input(f"Type {plan.target!r} to {plan.action} it: ")
        ok = answer.strip() == plan.target
    elif plan.tier is Tier.DISRUPTIVE:
        answer = input(f"{plan.action.capitalize()} {plan.target}? [y/N] ")
        ok = answer.strip().lower() in ("y", "yes")
    else:
        answer = input(f"Apply {plan.action}? [y/N] ")
        ok = answer.strip().lower() in ("y", "yes")
    if not ok:
        raise Refused("not confirmed")


class _ProgressPrinter:
    """Progress on stderr: every step's start and end, its updates at most every 2 s."""

    UPDATE_EVERY_S = 2.0

    def __init__(self) -> None:
        self.last_update: dict[str, float] = {}

    def __call__(self, event: Any) -> None:
        import time

        if str(event.status) == "running":
            now = time.monotonic()
            if now - self.last_update.get(event.step, 0.0) < self.UPDATE_EVERY_S:
                return
            self.last_update[event.step] = now
        _err(_safe(f"  [{event.status}] {event.step}: {event.text}"))


def _show_outcome(outcome: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"outcome": outcome.to_dict()}), flush=True)
        return
    from gpucon.actions.render import outcome_lines

    for line in outcome_lines(outcome):
        print(_safe(line))
