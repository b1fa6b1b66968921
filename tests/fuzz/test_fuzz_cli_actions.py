"""The command line and the actions' parameters under fuzzing: any argv for the console and
the verbs exits 2 with a message or parses to values the console and the plans accept; any
params give a plan or a BadParams naming the field — never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import math
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from gpucon.actions.catalog import get_action
from gpucon.actions.plan import Plan
from gpucon.actions.render import plan_lines
from gpucon.commands import action_params as action_verbs
from gpucon.commands import console
from gpucon.commands import probe as probe_verb
from gpucon.commands.cli import build_parser, main
from gpucon.config import GpuconConfig
from gpucon.errors import MAX_ACTION_TIMEOUT_S, MAX_WEIGHT, BadParams
from gpucon.model.ids import escaped_name
from gpucon.model.snapshot import Snapshot
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.runner import DemoFleetRunner
from tests.fuzz.invariants import check_seconds
from tests.fuzz.strategies import edge_floats, hostile_text, number_text


def demo_snapshot() -> Snapshot:
    runner = DemoFleetRunner(build_sim_fleet(7))
    runner.fleet.step(30.0)
    return runner.snapshot()


SNAPSHOT = demo_snapshot()
NAMES = sorted(SNAPSHOT.backends)
NODES = sorted({b.node for b in SNAPSHOT.backends.values() if b.node} | set(SNAPSHOT.nodes))
GPUS = sorted(f"{g.host}/gpu{g.index}" for g in SNAPSHOT.gpus.values())
LAYOUTS = ["4g.40gb+2g.20gb+1g.10gb", "7g.80gb", "2x3g.40gb+1x1g.10gb", "3g.20gb@4+2g.10gb"]

name_like = st.one_of(
    st.sampled_from(NAMES),
    st.sampled_from(NAMES).map(escaped_name),
    st.sampled_from(NAMES).map(lambda n: f" {n} "),
    hostile_text,
)
usual_value = st.sampled_from([1, 2, 5, 30, 0.5, 10.0, "3", 100])
param_value = st.one_of(
    usual_value, usual_value, edge_floats, st.integers(), number_text, hostile_text, st.none()
)
PARAMS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "drain": {
        "backend": name_like,
        "node": st.sampled_from(NODES or ["n"]) | hostile_text,
        "reason": hostile_text,
        "timeout_s": param_value,
        "poll_s": param_value,
        "force": st.booleans(),
    },
    "undrain": {
        "backend": name_like,
        "node": st.sampled_from(NODES or ["n"]) | hostile_text,
        "reason": hostile_text,
        "default_weight": param_value,
    },
    "rebalance": {
        "weights": st.dictionaries(name_like, param_value, max_size=4) | param_value,
        "registry_version": st.integers() | param_value,
        "reason": hostile_text,
    },
    "reslice": {
        "gpu": st.sampled_from(GPUS) | hostile_text,
        "layout": st.sampled_from(LAYOUTS) | hostile_text | param_value,
        "config_name": hostile_text,
        "config_text": hostile_text,
        "executor": st.sampled_from(["nvml", "simulated", "kubernetes", "nvidia-smi", "x"]),
        "drain": st.booleans(),
        "timeout_s": param_value,
        "poll_s": param_value,
        "reason": hostile_text,
    },
    "probe": {
        "target": name_like,
        "simulated": st.just(True),
        **{k: param_value for k in ("count", "rate", "concurrency", "duration", "timeout")},
        "via_queue": st.booleans(),
    },
}


def check_plan(plan: Plan) -> None:
    """A plan whose numbers work where they are used, and that renders."""
    for key, value in plan.params.items():
        if isinstance(value, float):
            assert math.isfinite(value), (key, value)
        if key in ("timeout_s", "poll_s") and value is not None:
            check_seconds(float(value))
            assert float(value) <= MAX_ACTION_TIMEOUT_S
    for weight in dict(plan.params.get("weights") or {}).values():
        assert math.isfinite(weight) and 0 <= weight <= MAX_WEIGHT
    assert plan_lines(plan)
    json.dumps(plan.params, default=str)


def plan_or_refuse(action: str, params: dict[str, Any]) -> None:
    try:
        plan = get_action(action).plan(SNAPSHOT, params)
    except BadParams as exc:
        assert str(exc).startswith(f"{exc.field}: "), str(exc)
        assert len(str(exc)) < 1_500 and "\x1b" not in str(exc), str(exc)[:200]
        event(f"{action}: refused")
        return
    event(f"{action}: planned")
    check_plan(plan)


VALID: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "drain": {"backend": st.sampled_from(NAMES), "timeout_s": st.sampled_from([1, 30.0, 600])},
    "undrain": {"backend": st.sampled_from(NAMES)},
    "rebalance": {
        "weights": st.dictionaries(st.sampled_from(NAMES), st.sampled_from([0.5, 1, 3]),
                                   min_size=1, max_size=3)
    },
    "probe": {"target": st.sampled_from(NAMES), "simulated": st.just(True)},
    "reslice": {"gpu": st.sampled_from(GPUS), "layout": st.sampled_from(LAYOUTS)},
}  # fmt: skip


@st.composite
def action_params(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """An action and its params: any mix of the fields, or a valid set with one field changed
    (most plans are then made, so the property checks accepted values, not only refusals)."""
    action = draw(st.sampled_from(sorted(PARAMS)))
    if draw(st.booleans()):
        return action, draw(st.fixed_dictionaries({}, optional=PARAMS[action]))
    params = draw(st.fixed_dictionaries(VALID[action]))
    if draw(st.booleans()):
        key = draw(st.sampled_from(sorted(PARAMS[action])))
        params[key] = draw(PARAMS[action][key])
    return action, params


@given(action_params())
def test_any_action_params_give_a_plan_or_bad_params(case: tuple[str, dict[str, Any]]) -> None:
    action, params = case
    plan_or_refuse(action, params)


# -- the command line ------------------------------------------------------------------------

OPTIONS: dict[str, list[str]] = {
    "demo": ["--refresh", "--page-seconds", "--seed", "--size", "--scenario", "--noc"],
    "live": ["--refresh", "--page-seconds", "--noc"],
    "drain": ["--reason", "--timeout", "--node", "--force", "--dry-run", "--json"],
    "undrain": ["--reason", "--node", "--dry-run"],
    "rebalance": ["--set", "--reason", "--dry-run"],
    "reslice": ["--config-name", "--via", "--no-drain", "--timeout", "--force", "--dry-run"],
    "probe": ["--count", "--rate", "--duration", "--timeout", "--concurrency", "--via-queue"],
    "audit": ["--limit", "--json", "--stream", "--all"],
    "config": [],
}
token = st.one_of(
    number_text,
    st.sampled_from(NAMES),
    st.sampled_from(["b1=2", "x=nan", "=", "b=1e308", "--", "-", "--bogus", "check", "-h"]),
    hostile_text,
).filter(lambda t: t not in ("-h", "--help"))


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(OPTIONS)))
    argv = [command]
    if command in ("drain", "undrain", "probe"):
        argv.append(draw(st.sampled_from(NAMES) | token))
    if command == "reslice":
        argv.append(draw(st.sampled_from(GPUS) | token))
        argv.append(draw(st.sampled_from(LAYOUTS) | token))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        with_option: bool = draw(st.booleans())
        if OPTIONS[command] and with_option:
            argv.append(draw(st.sampled_from(OPTIONS[command])))
        argv.append(draw(token))
    return argv


def parse(argv: list[str]) -> Any:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return build_parser(argv).parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 2, (argv, exc.code)
        assert "gpucon" in err.getvalue() and "Traceback" not in err.getvalue()
        return None


@given(argvs())
def test_any_argv_exits_2_with_a_message_or_gives_values_that_work(argv: list[str]) -> None:
    args = parse(argv)
    if args is None:
        event(f"{argv[0]}: usage error")
        return
    event(f"{argv[0]}: parsed")
    if args.command in ("demo", "live"):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                check_seconds(console._refresh(args, 1.0))
                check_seconds(console._seconds("--page-seconds", args.page_seconds, 1.0))
        except SystemExit as exc:
            assert exc.code == 2 and "(seconds): must be" in err.getvalue(), err.getvalue()
    elif args.command in ("drain", "undrain", "rebalance", "reslice"):
        try:
            params = action_verbs.params_from_args(args)
        except BadParams:
            return
        plan_or_refuse(args.command, params)
    elif args.command == "probe":
        args.demo = True
        plan_or_refuse("probe", probe_verb.params_from_args(args, GpuconConfig()))


@settings(max_examples=25)
@given(st.sampled_from(["drain", "undrain", "rebalance", "reslice"]), st.lists(token, max_size=3))
def test_a_demo_dry_run_from_the_command_line_never_raises(verb: str, extra: list[str]) -> None:
    """End to end through ``main``: a dry run on the demo fleet exits 0, 2 or 3."""
    first = {"rebalance": [], "reslice": [GPUS[0], LAYOUTS[0]]}.get(verb, [NAMES[0]])
    argv = [verb, *first, *extra, "--demo", "--dry-run"]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
    except SystemExit as exc:  # argparse's usage error
        code = int(exc.code or 0)
    assert code in (0, 2, 3), (argv, code, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue()
