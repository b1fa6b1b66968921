"""An audit record whose time is not a time (NaN, infinite, 1e300, text, missing) is refused
by name and skipped by every reader; formatting a time never raises."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpucon.actions.audit import read_audit, records_from_rows
from gpucon.commands.cli import main
from gpucon.controls.audit_log import AuditRecord
from gpucon.errors import format_ts

GOOD = {"ts": 1700000000.5, "operator": "ann@h1", "event": "intent", "action": "drain",
        "target": "b1", "digest": "d"}  # fmt: skip
BAD_TS = [math.nan, math.inf, -math.inf, 1e300, -1.0, "soon", None, True, [1]]


@pytest.mark.parametrize("ts", BAD_TS)
def test_from_dict_refuses_a_time_that_is_not_one(ts: object) -> None:
    with pytest.raises(ValueError, match=r"^ts: "):
        AuditRecord.from_dict({**GOOD, "ts": ts})


def test_from_dict_refuses_a_missing_time_and_takes_a_text_one() -> None:
    with pytest.raises(ValueError, match=r"^ts: "):
        AuditRecord.from_dict({k: v for k, v in GOOD.items() if k != "ts"})
    assert AuditRecord.from_dict({**GOOD, "ts": "1700000000.5"}).ts == 1700000000.5  # stream


@pytest.mark.parametrize("ts", [math.nan, math.inf, 1e300, -1e300])
def test_format_ts_is_total(ts: float) -> None:
    assert "invalid time" in format_ts(ts)
    assert format_ts(0.0) == "1970-01-01 00:00:00 UTC"


def bad_file(path: Path) -> Path:
    lines = [json.dumps(GOOD)]
    lines += ['{"ts": NaN, "event": "intent"}', '{"ts": Infinity}', '{"ts": 1e300}']
    lines += [json.dumps({**GOOD, "ts": 1700000001.0, "event": "outcome"})]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_readers_skip_records_without_a_usable_time(tmp_path: Path) -> None:
    records = read_audit(bad_file(tmp_path / "audit.jsonl"))
    assert [r.event for r in records] == ["intent", "outcome"]
    rows = [{**GOOD, "ts": "nan"}, {**GOOD, "ts": "1e300"}, {**GOOD, "ts": "5"}]
    assert [r.ts for r in records_from_rows(rows)] == [5.0]


def test_gpucon_audit_prints_the_good_records_of_a_file_with_bad_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_AUDIT_PATH", str(bad_file(tmp_path / "audit.jsonl")))
    assert main(["audit"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("2023-11-14 22:13:20 UTC  ?")
    assert out[0].split()[3:6] == ["?", "ann@h1", "intent"]
