"""The action verbs end to end against a real redis-server: output, confirmation, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from gpucon.commands.cli import main
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys

pytestmark = pytest.mark.integration


@pytest.fixture
def client(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> redis.Redis:
    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_REDIS_URL", redis_url)
    monkeypatch.setenv("GPUCON_AUDIT_PATH", str(tmp_path / "audit.jsonl"))
    monkeypatch.setenv("GPUCON_OPERATOR", "cli@test")
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    return c


def test_drain_yes_json_then_undrain(
    client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["drain", "b1", "--yes", "--json", "--reason", "maintenance"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0]["plan"]["target"] == "b1" and out[0]["plan"]["tier"] == 2
    assert out[1]["outcome"]["status"] == "ok"
    assert [s["step"] for s in out[1]["outcome"]["steps"]] == [
        "draining:b1",
        "wait:b1",
        "drained:b1",
    ]
    assert client.hget(keys.backend_key("b1"), "state") == "drained"
    assert client.hget(keys.backend_key("b1"), "owner") == "cli@test"
    assert main(["undrain", "b1", "--yes"]) == 0
    assert "active again with weight 2" in capsys.readouterr().out
    assert client.hget(keys.backend_key("b1"), "weight") == "2.0"
    # the audit verb shows both runs, intent first
    assert main(["audit", "--json", "--limit", "100"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["action"], e["event"]) for e in events][:1] == [("drain", "intent")]
    assert [e["event"] for e in events].count("outcome") == 2
    assert main(["audit", "--stream"]) == 0
    assert "cli@test" in capsys.readouterr().out
    # merged: this console's records are in both (once each, marked so), a colleague's only
    # in the stream
    client.xadd("gpucon:audit", {"ts": "1", "operator": "bob@h2", "event": "intent",
                                 "action": "drain", "target": "b9", "digest": "x"})  # fmt: skip
    assert main(["audit", "--all", "--json", "--limit", "100"]) == 0
    merged = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert merged[0]["operator"] == "bob@h2" and merged[0]["origin"] == "redis"
    ours = [e for e in merged if e["operator"] == "cli@test"]
    assert len(ours) == len(events) and {e["origin"] for e in ours} == {"file+redis"}


def test_dry_run_changes_nothing(client: redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    version = client.get(keys.VERSION)
    assert main(["drain", "b1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "drain b1  (tier 2 · disruptive)" in out
    # b2's url refuses connections (nothing listens there): it is active but not serving,
    # and the plan says that nothing takes the load rather than PASS
    assert "[WARN] others_serving:m: no other backend serving model m: 1 active but not " in out
    assert "undo: gpucon undrain b1" in out
    assert client.get(keys.VERSION) == version
    assert client.hget(keys.backend_key("b1"), "state") == "active"


def test_without_yes_and_without_a_terminal_it_refuses(
    client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["drain", "b1"]) == 3
    assert "stdin is not a terminal (pass --yes" in capsys.readouterr().err
    assert client.hget(keys.backend_key("b1"), "state") == "active"


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["drain", "ghost", "--yes"], 2, "backend: unknown backend 'ghost'"),
        (["drain", "b1", "--yes", "--timeout", "nan"], 2, "timeout_s: must be a finite number"),
        (["rebalance", "--set", "b1=-3", "--yes"], 2, "weights.b1: must be from 0 to 1,000,000"),
        (["rebalance", "--set", "b1=1e308", "--yes"], 2, "weights.b1: must be from 0 to 1,000,000"),
        (
            ["drain", "b1", "--yes", "--timeout", "99999999999"],
            2,
            "timeout_s: must be from 0.01 to 86,400, got 99999999999.0",
        ),
        (
            ["drain", "b1", "--yes", "--reason", "x" * 100_000],
            2,
            "reason: must be at most 500 characters, got 'xxx",
        ),
        (["rebalance", "--set", "b1=nan", "--yes"], 2, "weights.b1: must be a finite number"),
        (["rebalance", "--set", "b1", "--yes"], 2, "--set: expected NAME=WEIGHT"),
        (["rebalance", "--set", "b1=0", "--set", "b2=0", "--yes"], 2, "weights: all active"),
        (["undrain", "b1", "--yes"], 3, "not drained, nothing to do"),
        (["--read-only", "drain", "b1", "--yes"], 3, "read-only mode"),
        (["audit", "--limit", "0"], 2, "--limit: must be a positive number"),
    ],
)
def test_refusals_have_exit_codes_and_name_the_field(
    client: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    message: str,
) -> None:
    version = client.get(keys.VERSION)
    assert main(argv) == code
    assert message in capsys.readouterr().err
    assert client.get(keys.VERSION) == version


def test_lock_held_exit_code_names_the_holder(
    client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = json.dumps({"token": "t", "holder": "ann@h1", "since": 1.0e9, "action": "drain"})
    client.set(keys.lock_key("b1"), holder, px=10_000)
    assert main(["drain", "b1", "--yes"]) == 4
    assert "b1 is locked by ann@h1 (drain) since 2001-09-09" in capsys.readouterr().out
    assert client.hget(keys.backend_key("b1"), "state") == "active"


def test_drain_timeout_exit_code(client: redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    client.eval(rs.ASSIGN_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")
    assert main(["drain", "b1", "--yes", "--timeout", "0.3"]) == 6
    out = capsys.readouterr().out
    assert "timeout:" in out and "state: b1: state=draining" in out


def test_rebalance_set_applies_all_weights(
    client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rebalance", "--set", "b1=1.5", "--set", "b2=3", "--yes"]) == 0
    assert client.hget(keys.backend_key("b1"), "weight") == "1.5"
    assert client.hget(keys.backend_key("b2"), "weight") == "3.0"
    assert "b1: 2 → 1.5" in capsys.readouterr().out


def _run_on_a_terminal(argv: list[str], answer: str, env: dict[str, str]) -> tuple[int, str]:
    """Run ``gpucon argv`` with a pseudo-terminal as stdin/stdout, answer its question."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucon.commands.cli", *argv],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    output = b""
    answered = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        if not answered and b"[y/N]" in output:
            os.write(leader, answer.encode() + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    code = proc.wait(timeout=10)
    os.close(leader)
    return code, output.decode(errors="replace")


@pytest.mark.parametrize(("answer", "code", "state"), [("n", 3, "active"), ("y", 0, "drained")])
def test_on_a_terminal_it_asks_naming_the_target(
    client: redis.Redis, answer: str, code: int, state: str
) -> None:
    import os

    got, output = _run_on_a_terminal(["drain", "b1"], answer, dict(os.environ))
    assert "Drain b1? [y/N]" in output
    assert got == code, output
    assert client.hget(keys.backend_key("b1"), "state") == state


def test_an_unreachable_registry_is_exit_1_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.servers import free_port

    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    assert main(["drain", "b1", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "gpucon drain: Redis:" in err and "nothing changed" in err
    assert "Traceback" not in err


def test_proposed_rebalance_reads_the_fleet_through_its_sources(
    client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    client.hset(keys.backend_key("b2"), "weight", "3.0")
    version = int(client.get(keys.VERSION) or 0)
    stats: Any = client.info("commandstats")
    scripts_before = stats.get("cmdstat_eval_ro", {}).get("calls", 0)
    # nothing to change is a refused dry-run (exit 3), and the plan is still printed
    assert main(["rebalance", "--dry-run", "--json"]) == 3
    stats = client.info("commandstats")
    assert stats["cmdstat_eval_ro"]["calls"] > scripts_before  # the Redis source read it
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["registry_version"] == version
    # the redis source told of both backends, but no latency, activity or SM counts: no
    # capacity is known, so the weights stay (rescaling them would move nothing but churn)
    assert plan["params"]["weights"] == {"b1": 2.0, "b2": 3.0}
    assert plan["params"]["old_weights"] == {"b1": 2.0, "b2": 3.0}
    assert plan["params"]["basis"] == "capacity: 2 kept"
    assert "no capacity known" in plan["params"]["reasons"]["b1"]


def test_a_backend_whose_name_holds_a_control_character_is_named_by_its_escaped_form(
    client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = "b\x1b[31m3"
    register_backends(client, [BackendRecord(odd, "http://127.0.0.1:3", "m", "h/gpu1")])
    # a name that is not there is refused with the known names in the escaped form
    assert main(["drain", "ghost", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "b\\x1b[31m3" in err and "\x1b" not in err
    # that form names the backend: it is drained, by its real name in the registry
    assert main(["drain", "b\\x1b[31m3", "--yes", "--timeout", "5"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert client.hget(keys.backend_key(odd), "state") == "drained"
    assert main(["undrain", "b\\x1b[31m3", "--yes"]) == 0
    assert client.hget(keys.backend_key(odd), "state") == "active"
