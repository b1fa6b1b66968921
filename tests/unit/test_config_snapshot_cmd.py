"""``gpucon snapshot --demo``: one snapshot of the simulator, as JSON or text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucon.commands.cli import main

KEYS = ["taken_at", "seq", "fleet", "rate_window", "gpus", "slots", "backends", "queues",
        "latency", "nodes", "liveness", "sources", "alerts"]  # fmt: skip


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUCON_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))


def snapshot_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["snapshot", "--demo", "--json", *args]) == 0
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return doc


def test_demo_json_shape_and_sorted_entities(capsys: pytest.CaptureFixture[str]) -> None:
    doc = snapshot_json(capsys, "--seed", "3")
    assert list(doc) == KEYS
    assert doc["fleet"] == "demo"
    slots = doc["slots"]
    assert isinstance(slots, list) and slots
    ids = [s["id"] for s in slots]
    assert ids == sorted(ids)
    assert {"id", "kind", "activity_pct", "activity_metric", "mem_used_mib"} <= set(slots[0])
    sources = doc["sources"]
    assert isinstance(sources, list) and sources[0]["health"] == "ok"
    assert doc["rate_window"] == "10s"  # the simulator's smoothing, named like rate()'s window
    gpus = doc["gpus"]
    assert isinstance(gpus, list) and gpus
    health = {"temperature_c", "power_w", "power_limit_w", "util_pct", "xid_last", "xid_at"}
    assert health | {"thermal_slowdown", "power_capped", "xid_watched"} <= set(gpus[0])
    # the simulated backends answer their readiness checks: each is serving, the sim said so
    liveness = doc["liveness"]
    assert isinstance(liveness, list) and len(liveness) == len(doc["backends"])  # type: ignore[arg-type]
    assert {(lv["serving"], lv["http_source"]) for lv in liveness} == {(True, "sim")}
    assert all(0 < lv["http_checked_at"] <= doc["taken_at"] for lv in liveness)


def test_same_seed_same_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    a = snapshot_json(capsys, "--seed", "11")
    b = snapshot_json(capsys, "--seed", "11")

    def shape(doc: dict[str, object], part: str, fields: tuple[str, ...]) -> list[object]:
        items = doc[part]
        assert isinstance(items, list)
        return [tuple(item[f] for f in fields) for item in items]

    assert shape(a, "slots", ("id", "kind", "profile")) == shape(
        b, "slots", ("id", "kind", "profile")
    )
    assert shape(a, "backends", ("name", "slot_id")) == shape(b, "backends", ("name", "slot_id"))


def test_demo_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--demo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fleet demo · ")
    assert "SLOT" in out and "source sim" in out
    assert "REQ/S 10s" in out
    gpu_header = next(line for line in out.splitlines() if line.startswith("GPU "))
    assert gpu_header.split()[2:] == ["TEMP", "POWER", "UTIL", "XID", "CLOCKS"]
    gpu_lines = out.split(gpu_header, 1)[1].splitlines()
    h200 = next(line for line in gpu_lines if "NVIDIA H200" in line)
    assert "°C" in h200 and "/700W" in h200 and " none " in h200


def test_unknown_scenario_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--demo", "--scenario", "meteor"]) == 2
    assert "scenario: unknown 'meteor'" in capsys.readouterr().err
