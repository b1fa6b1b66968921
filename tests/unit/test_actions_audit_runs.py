"""Which runs never finished (interrupted or running), and which fleet each record names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucon.actions.audit import (
    INTERRUPTED,
    RUNNING,
    format_record,
    read_audit,
    run_statuses,
    unfinished_intents,
)
from gpucon.commands.cli import main
from gpucon.config import GpuconConfig
from gpucon.controls.audit_log import AuditLog, AuditRecord
from gpucon.controls.base import audit_path_for, demo_audit_path
from gpucon.session import DemoOptions, open_session


def rec(ts: float, event: str, target: str = "b1", status: str = "", **kw: str) -> AuditRecord:
    fields = {"operator": "ann@h1", "action": "drain", "digest": "d1", "fleet": "lab", **kw}
    return AuditRecord(
        ts,
        fields["operator"],
        event,
        fields["action"],
        target,
        fields["digest"],
        status,
        fleet=fields["fleet"],
    )


def test_a_killed_run_stays_interrupted_behind_the_rerun_that_finished() -> None:
    records = [
        rec(1, "intent"),  # killed: no outcome
        rec(2, "step", status="done"),
        rec(3, "intent"),  # the rerun, same plan
        rec(4, "outcome", status="ok"),
        rec(5, "intent", target="b2"),  # finished
        rec(6, "outcome", target="b2", status="failed"),
        rec(7, "refused", target="b3", status="lock_held"),  # never started: not a run
    ]
    assert unfinished_intents(records) == {0}
    assert run_statuses(records) == [INTERRUPTED, "done", "", "ok", "", "failed", "lock_held"]


def test_an_outcome_closes_only_its_own_fleet_operator_and_plan() -> None:
    records = [
        rec(1, "intent"),
        rec(2, "intent", fleet="other"),
        rec(3, "intent", operator="bob@h2"),
        rec(4, "outcome", status="ok", digest="d2"),  # another plan's outcome
        rec(5, "outcome", status="ok", fleet="other"),
    ]
    assert unfinished_intents(records) == {0, 2}


def test_an_unfinished_intent_is_running_while_its_operator_holds_the_lock() -> None:
    records = [rec(1, "intent"), rec(2, "intent", target="b2"), rec(3, "intent", target="b3")]
    holders = {"b1": "ann@h1", "b2": "bob@h2"}  # b2's lock is someone else's: ann's run died
    assert run_statuses(records, holders.get) == [RUNNING, INTERRUPTED, INTERRUPTED]

    asked: list[str] = []

    def down(target: str) -> str | None:
        asked.append(target)
        raise ConnectionError("Redis down")

    assert run_statuses(records, down) == [INTERRUPTED] * 3
    assert asked == ["b1"]  # one failed read is enough: the others are not asked


def test_records_name_their_fleet_and_old_ones_read_without_one(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl", clock=lambda: 10.0, fleet="lab")
    written = log.record(operator="ann@h1", event="intent", action="drain", target="b1", digest="d")
    assert written.fleet == "lab" and written.to_dict()["fleet"] == "lab"
    with (tmp_path / "a.jsonl").open("a") as f:  # a record from before records named a fleet
        f.write(json.dumps({"ts": 11, "operator": "bob", "event": "intent", "target": "b2"}) + "\n")
    first, old = read_audit(tmp_path / "a.jsonl")
    assert first == written and old.fleet == ""
    assert format_record(first, INTERRUPTED).split("  ")[1:4] == ["lab", "ann@h1", "intent"]
    assert format_record(old).split("  ")[1] == "?"


def test_the_demo_audits_to_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="demo@test")
    assert demo_audit_path(config) == tmp_path / "audit-demo.jsonl"
    assert demo_audit_path(GpuconConfig()).name == "audit-demo.jsonl"
    assert demo_audit_path(GpuconConfig()).parent == audit_path_for(GpuconConfig()).parent
    session = open_session(config, demo=DemoOptions())
    try:
        assert session.audit_path == tmp_path / "audit-demo.jsonl"
        controls = session.controls()
        assert controls.audit.path == tmp_path / "audit-demo.jsonl"
        assert controls.audit.fleet == "simulated" and controls.audit.stream is None
    finally:
        session.close()
    # gpucon audit --demo reads it; plain gpucon audit reads the live fleet's file only
    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_AUDIT_PATH", str(tmp_path / "audit.jsonl"))
    AuditLog(tmp_path / "audit-demo.jsonl", clock=lambda: 5.0, fleet="simulated").record(
        operator="demo@test", event="intent", action="drain", target="sim-b1", digest="d"
    )
    assert main(["audit", "--demo"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split()[3:9] == [
        "simulated",
        "demo@test",
        "intent",
        "drain",
        "sim-b1",
        "interrupted",
    ]
    assert main(["audit"]) == 0
    assert capsys.readouterr().out == ""
