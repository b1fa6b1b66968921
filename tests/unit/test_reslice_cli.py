"""``gpucon reslice GPU LAYOUT`` on the demo fleet: dry run, JSON, the typed confirmation,
read-only refusal, mig-parted files, exit codes and the audit trail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucon.actions.audit import read_audit
from gpucon.commands.cli import main

GPU = "node-a/gpu0"
LAYOUT = "4g.40gb+2g.20gb+1g.10gb"


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_AUDIT_PATH", str(tmp_path / "audit.jsonl"))


def test_dry_run_prints_the_plan_as_json_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reslice", GPU, LAYOUT, "--demo", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["action"] == "reslice" and plan["tier"] == 3 and plan["target"] == GPU
    assert plan["params"]["placements"] == [
        ["4g.40gb", 5, 0, 4],
        ["2g.20gb", 14, 4, 2],
        ["1g.10gb", 19, 6, 1],
    ]
    assert plan["params"]["executor"] == "simulated"
    assert not (tmp_path / "audit-demo.jsonl").exists()


def test_a_layout_that_does_not_fit_is_refused_with_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["reslice", GPU, "2x3g.40gb+1x1g.10gb", "--demo", "--dry-run"]) == 3
    out = capsys.readouterr().out
    assert "[FAIL] layout: no placement of 2 × 3g.40gb + 1 × 1g.10gb fits" in out
    assert main(["reslice", GPU, "9g.1gb", "--demo", "--dry-run"]) == 3
    assert main(["reslice", GPU, "--demo", "--dry-run"]) == 2
    assert "give a LAYOUT" in capsys.readouterr().err
    assert main(["reslice", GPU, "3g.40gb@", "--demo"]) == 2


def test_the_gpu_name_must_be_typed_to_confirm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked: list[str] = []

    def typed(answer: str) -> None:
        def reply(prompt: str) -> str:
            asked.append(prompt)
            return answer

        monkeypatch.setattr("builtins.input", reply)

    typed("yes")  # a yes is not the GPU's name
    assert main(["reslice", GPU, LAYOUT, "--demo"]) == 3
    assert asked == [f"Type {GPU!r} to reslice it: "]
    assert "not confirmed" in capsys.readouterr().err
    typed(GPU)
    assert main(["reslice", GPU, LAYOUT, "--demo"]) == 0
    events = [r.event for r in read_audit(tmp_path / "audit-demo.jsonl")]
    assert events[0] == "intent" and events[-1] == "outcome"
    assert "ok: re-sliced node-a/gpu0: 3 instance(s)" in capsys.readouterr().out


def test_read_only_refuses_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reslice", GPU, LAYOUT, "--demo", "--yes", "--read-only"]) == 3
    assert "read-only" in capsys.readouterr().err
    assert not (tmp_path / "audit-demo.jsonl").exists()


def test_a_mig_parted_config_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mig.yaml"
    path.write_text(
        "version: v1\nmig-configs:\n  big-small:\n    - devices: all\n      mig-enabled: true\n"
        '      mig-devices: {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}\n'
    )
    argv = ["reslice", GPU, "--config-file", str(path), "--config-name", "big-small"]
    assert main([*argv, "--demo", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert [p[0] for p in plan["params"]["placements"]] == ["4g.40gb", "2g.20gb", "1g.10gb"]
    assert plan["params"]["config_name"] == "big-small"
    bad = ["reslice", GPU, "--config-file", str(path), "--config-name", "nope", "--demo"]
    assert main([*bad, "--dry-run"]) == 2
    assert "no config 'nope'" in capsys.readouterr().err
