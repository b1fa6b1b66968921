"""``gpucon replay`` as a command: ``--json`` only with ``--alerts-only``, and alert lines that
show recorded text as it reads (quotes as they are) with control characters escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.commands.cli import main
from gpucon.commands.replay import _span_line
from gpucon.recording.store import AlertSpan

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "noisy-neighbour.recording.sqlite"


def test_json_without_alerts_only_is_a_usage_error_not_the_console(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GPUCON_CONFIG", "GPUCON_FLEET"):
        monkeypatch.delenv(name, raising=False)
    assert main(["replay", str(EXAMPLE), "--json"]) == 2
    captured = capsys.readouterr()
    assert "--json needs --alerts-only" in captured.err
    assert captured.out == ""


def test_alert_lines_print_quotes_as_they_are_and_escape_control_characters() -> None:
    span = AlertSpan(
        key="not_ready:b1",
        rule="not_ready",
        target="b\x1b[31m1",
        severity=2,
        message="not ready: backend's readiness 'failed'\x07 \\ done",
        since=1.0,
        start=1_790_000_000.0,
        end=None,
    )
    line = _span_line(span, "as recorded")
    assert "backend's readiness 'failed'\\x07 \\ done" in line
    assert "\\'" not in line
    assert "b\\x1b[31m1" in line and "\x1b" not in line and "\x07" not in line
