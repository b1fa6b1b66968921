"""The action verbs: ``gpucon drain``, ``undrain``, ``rebalance``, ``reslice``, ``mps-restart``,
``probe`` and ``audit``.

Each verb plans on the registry as it is now, prints the plan, asks (on a terminal; without
one it refuses unless ``--yes``), then applies it under the guard (lock, audit) and prints
each step and the outcome. ``--dry-run`` prints the plan and stops; ``--json`` prints the plan
and the outcome as JSON on stdout (progress goes to stderr); ``--demo`` acts on a simulated
fleet instead of the configured one. The verbs' params are gathered in
``gpucon.commands.action_params``; ``gpucon audit`` lives in ``gpucon.commands.audit``.

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
    from gpucon.session import Session

from gpucon.commands.action_params import (
    add_reslice_arguments,
    mig_executor,
    mps_params,
    params_from_args,
)
from gpucon.commands.audit import AUDIT_EXIT_CODES_HELP, add_audit_arguments, run_audit
from gpucon.commands.terminal_text import err as _err
from gpucon.commands.terminal_text import safe_line as _safe

EXIT_CODES_HELP = __doc__.split("Exit codes:")[1].split("Only the standard")[0]
ACTION_VERBS = ("drain", "undrain", "rebalance", "reslice", "mps-restart")


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    codes = AUDIT_EXIT_CODES_HELP if command_name == "audit" else EXIT_CODES_HELP
    parser.epilog = "exit codes:" + codes
    if command_name == "audit":
        add_audit_arguments(parser)
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
        _add_drain_wait_arguments(
            parser,
            timeout_help="seconds to wait for in-flight work when draining (120)",
            force_help="restart even if nothing else serves a model",
        )
    if command_name == "undrain":
        parser.add_argument(
            "--node",
            action="store_true",
            help="NAME is a Kubernetes node: uncordon it and undrain all its backends",
        )
    if command_name == "drain":
        _add_drain_wait_arguments(
            parser,
            timeout_help="seconds to wait for in-flight work (120)",
            force_help="drain even the last serving backend",
        )
    if command_name == "reslice":
        add_reslice_arguments(parser)
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


def _add_drain_wait_arguments(
    parser: argparse.ArgumentParser, *, timeout_help: str, force_help: str
) -> None:
    """``--timeout`` (how long a drain waits for in-flight work: 120 s) and ``--force`` (past
    the last-server check), as ``drain`` and ``mps-restart`` (which drains first) take them."""
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S", help=timeout_help)
    parser.add_argument("--force", action="store_true", help=force_help)


def run(args: argparse.Namespace) -> int:
    if args.command == "audit":
        return reported(args, lambda: run_audit(args))
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
        params["executor"] = mig_executor(session, params.get("executor"))
    if "node" in params:
        params["kube"] = session.config.fleet.kube is not None and not session.demo
    if args.command == "mps-restart":
        mps_params(session, snapshot, params)
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
