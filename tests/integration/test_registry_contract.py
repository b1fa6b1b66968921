"""One contract, two registries: the same state-machine tests against Redis and the simulator.

``RedisRegistry`` runs on a real redis-server, ``SimRegistry`` on the simulated fleet; both
must make exactly the moves ``gpucon.registry.states.TRANSITIONS`` allows, write nothing when
they refuse, and remember and restore the weight around a drain. A hash the three readers once
read three ways (no state and weight -3; weight nan) must read the same through the console's
source, the command line's planning read (``gpucon drain --dry-run``) and the controls.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.registry_snapshot import read_registry
from gpucon.commands.cli import main
from gpucon.controls.base import RegistryControl
from gpucon.controls.registry import RedisRegistry
from gpucon.errors import BadParams, StalePlan, StateMoved
from gpucon.lab import registry_scripts as rs
from gpucon.lab.backend_pool import BackendView
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.fleet import Backend, BackendState
from gpucon.registry import keys
from gpucon.registry.states import TRANSITIONS
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.registry import SimRegistry
from gpucon.sources.redisq import RedisQueueSource

pytestmark = pytest.mark.integration

ALL_STATES = tuple(BackendState)


@dataclass
class Subject:
    """A registry under test and a way to put one of its backends in any state directly."""

    control: RegistryControl
    name: str
    put: Callable[[BackendState, float], None]  # (state, weight), bypassing the machine


def _redis_subject(url: str) -> Iterator[Subject]:
    client = redis.Redis.from_url(url, decode_responses=True)
    register_backends(client, [BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0", 2.0)])

    def put(state: BackendState, weight: float) -> None:
        client.hset(keys.backend_key("b1"), mapping={"state": state.value, "weight": weight})
        client.hdel(keys.backend_key("b1"), "weight_before_drain")

    control = RedisRegistry.from_url(url)
    yield Subject(control, "b1", put)
    control.close()
    client.close()


def _sim_subject() -> Iterator[Subject]:
    fleet = build_sim_fleet(seed=3)
    name = sorted(fleet.backend_names())[0]

    def put(state: BackendState, weight: float) -> None:
        fleet.set_weights({name: weight})
        fleet.set_backend_state(name, state, "test", "put")

    yield Subject(SimRegistry(fleet), name, put)


@pytest.fixture(params=["redis", "sim"])
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    if request.param == "redis":
        yield from _redis_subject(request.getfixturevalue("redis_url"))
    else:
        yield from _sim_subject()


def _move(subject: Subject, target: BackendState) -> None:
    control, name = subject.control, subject.name
    if target is BackendState.DRAINING:
        control.begin_drain(name, "ann@h1", "contract")
    elif target is BackendState.ACTIVE:
        control.undrain(name, "ann@h1", "contract", default_weight=1.0)
    else:
        control.mark_state(name, target.value, "ann@h1", "contract")


@pytest.mark.parametrize("start", ALL_STATES)
@pytest.mark.parametrize("target", [s for s in ALL_STATES if s is not BackendState.DOWN])
def test_every_move_is_the_table_s(
    subject: Subject, start: BackendState, target: BackendState
) -> None:
    subject.put(start, 1.5)
    version = subject.control.version()
    if target in TRANSITIONS[start]:
        _move(subject, target)
        record = subject.control.backend(subject.name)
        assert record is not None and record.state is target
        assert subject.control.version() > version
    else:
        with pytest.raises(StateMoved, match=f"{subject.name} is {start.value}, not "):
            _move(subject, target)
        record = subject.control.backend(subject.name)
        assert record is not None and (record.state, record.weight) == (start, 1.5)
        assert subject.control.version() == version  # nothing written


def test_down_is_set_by_no_one(subject: Subject) -> None:
    with pytest.raises(BadParams, match="'down' is not a state gpucon sets"):
        subject.control.mark_state(subject.name, "down", "ann@h1", "contract")


def test_drain_remembers_the_weight_and_undrain_restores_it(subject: Subject) -> None:
    subject.put(BackendState.ACTIVE, 2.5)
    assert subject.control.begin_drain(subject.name, "ann@h1", "contract") == 2.5
    # a drain run again after a timeout keeps the weight from before the first one, not 0
    assert subject.control.begin_drain(subject.name, "ann@h1", "again") == 2.5
    drained = subject.control.backend(subject.name)
    assert drained is not None and (drained.weight, drained.weight_before_drain) == (0.0, 2.5)
    assert (drained.owner, drained.reason) == ("ann@h1", "again")
    subject.control.mark_state(subject.name, "drained", "ann@h1", "contract")
    with pytest.raises(StateMoved, match="is drained, not active or down or draining"):
        subject.control.begin_drain(subject.name, "bob@h2", "drain it twice")
    assert subject.control.undrain(subject.name, "ann@h1", "back", default_weight=9.0) == 2.5
    back = subject.control.backend(subject.name)
    assert back is not None and (back.state, back.weight) == (BackendState.ACTIVE, 2.5)
    assert back.weight_before_drain is None


def test_undrain_without_a_remembered_weight_uses_the_default(subject: Subject) -> None:
    subject.put(BackendState.DRAINED, 0.0)
    assert subject.control.undrain(subject.name, "ann@h1", "back", default_weight=3.0) == 3.0


def test_unknown_backend_and_stale_weights(subject: Subject) -> None:
    with pytest.raises(BadParams, match="no backend named 'ghost'"):
        subject.control.begin_drain("ghost", "ann@h1", "contract")
    assert subject.control.backend("ghost") is None
    version = subject.control.version()
    with pytest.raises(StalePlan):
        subject.control.set_weights({subject.name: 1.0}, version - 1, "ann@h1", "stale")
    assert subject.control.set_weights({subject.name: 4.0}, version, "ann@h1", "ok") > version
    record = subject.control.backend(subject.name)
    assert record is not None and record.weight == 4.0


# -- the hash three readers used to read three ways ---------------------------------------

ODD = {
    "odd": {"slot": "h/gpu0", "url": "http://127.0.0.1:9", "model": "m", "weight": "-3"},
    "nan": {"slot": "h/gpu1", "url": "http://127.0.0.1:8", "model": "m", "weight": "nan",
            "state": "active"},
    "ok": {"slot": "h/gpu2", "url": "http://127.0.0.1:7", "model": "m", "weight": "1",
           "state": "active"},
}  # fmt: skip
EXPECTED = {
    "odd": (BackendState.DOWN, None),
    "nan": (BackendState.ACTIVE, None),
    "ok": (BackendState.ACTIVE, 1.0),
}


@pytest.fixture
def odd_registry(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[redis.Redis]:
    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_REDIS_URL", redis_url)
    monkeypatch.setenv("GPUCON_AUDIT_PATH", str(tmp_path / "audit.jsonl"))
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    for name, fields in ODD.items():
        client.hset(keys.backend_key(name), mapping=dict(fields))  # type: ignore[arg-type]
        client.sadd(keys.BACKENDS, name)
    client.incr(keys.VERSION)
    yield client
    client.close()


def _seen(backends: dict[str, Backend]) -> dict[str, tuple[BackendState, float | None]]:
    return {name: (b.state, b.weight) for name, b in backends.items()}


def test_the_odd_hash_reads_the_same_everywhere(
    odd_registry: redis.Redis, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    console = RedisQueueSource(redis_url, streams=(), client_name="gpucon-contract").read()
    assert _seen({b.name: b for b in console.backends}) == EXPECTED
    assert console.error is not None
    assert f"{keys.backend_key('odd')}: no state field (read as down)" in console.error
    assert f"{keys.backend_key('odd')} field weight: expected a number >= 0" in console.error

    planning, _version = read_registry(odd_registry)
    assert _seen(dict(planning.backends)) == EXPECTED
    # the CLI's dry run plans on that same reading
    assert main(["drain", "odd", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    texts = [p["text"] for p in plan["preconditions"]] + [s["text"] for s in plan["steps"]]
    assert "odd is down" in texts
    assert "set odd state=draining, weight 0 (was n/a)" in texts

    controls = RedisRegistry.from_url(redis_url)
    records = {n: controls.backend(n) for n in ODD}
    assert _seen({n: r.backend for n, r in records.items() if r is not None}) == EXPECTED
    # the controls act on that reading too: a down backend may be drained, weight remembered
    # as unknown, and undrain falls back to the default
    assert controls.begin_drain("odd", "ann@h1", "contract") is None
    controls.close()

    # the reference scheduler: neither is eligible, and its assignment script agrees
    views = {n: BackendView.from_backend(b) for n, b in planning.backends.items()}
    assert {n: v.weight for n, v in views.items()} == {"odd": 0.0, "nan": 0.0, "ok": 1.0}
    for name, assigned in (("nan", 0), ("ok", 1)):
        reply = odd_registry.eval(rs.ASSIGN_LUA, 3, *rs.script_keys(name), "1-0", name)
        assert int(reply[0]) == assigned, name


def test_a_plan_on_the_odd_hash_is_the_same_plan_from_console_and_cli(
    odd_registry: redis.Redis, redis_url: str
) -> None:
    from gpucon.model.snapshot import Snapshot

    console = RedisQueueSource(redis_url, streams=(), client_name="gpucon-contract").read()
    from_console = Snapshot(taken_at=0.0, backends={b.name: b for b in console.backends})
    planning, _ = read_registry(odd_registry)
    params = {"backend": "ok", "reason": "contract"}
    a = drain.plan_drain(from_console, params)
    b = drain.plan_drain(planning, params)
    assert (a.preconditions, a.steps, a.blast_radius) == (b.preconditions, b.steps, b.blast_radius)
