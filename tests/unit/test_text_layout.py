"""``gpucon snapshot`` and ``gpucon audit`` text hold their layout: every column cut to its
width with an ellipsis, wide (CJK) characters measured in terminal cells, control codes never
printed raw — a 10 kB backend name once made a 10,198-character line, a CJK one shifted its
row by 8 cells."""

from __future__ import annotations

from rich.cells import cell_len

from gpucon.commands.audit import AUDIT_COLUMNS, audit_line
from gpucon.commands.snapshot_render import snapshot_text
from gpucon.controls.audit_log import AuditRecord
from gpucon.model.fleet import Backend, BackendState, Slot, SlotKind
from gpucon.model.snapshot import Snapshot

HUGE = "b" * 10_000
CJK = "推理服务器一号推理服务器二号"  # 14 wide characters: 28 cells
ODD = "b\x1b[31m1"


def fleet() -> Snapshot:
    backends = {
        "plain": Backend("plain", slot_id="h/gpu0", weight=1.0, state=BackendState.ACTIVE),
        HUGE: Backend(HUGE, slot_id="h/gpu0", weight=1.0, state=BackendState.ACTIVE),
        CJK: Backend(CJK, slot_id="h/gpu1", weight=2.0, state=BackendState.DRAINED),
        ODD: Backend(ODD, slot_id="h/gpu1", weight=1.0, state=BackendState.ACTIVE),
    }
    slots = {
        "h/gpu0": Slot("h/gpu0", SlotKind.GPU, profile="名前" * 20),
        "h/gpu1": Slot("h/gpu1", SlotKind.GPU),
    }
    return Snapshot(taken_at=1000.0, backends=backends, slots=slots)


def column_at(line: str, marker: str) -> int:
    """The terminal cell at which ``marker`` starts in ``line``."""
    return cell_len(line[: line.index(marker)])


def test_snapshot_text_cuts_every_column_and_measures_wide_characters() -> None:
    lines = snapshot_text(fleet(), "prod")
    assert max(cell_len(line) for line in lines) <= 160, max(len(x) for x in lines)
    assert all("\x1b" not in line for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("BACKEND "))
    rows = lines[header + 1 : header + 5]
    assert len(rows) == 4
    # each row's STATE column starts where the header's does, CJK and 10 kB names included
    state_at = column_at(lines[header], "STATE")
    for row in rows:
        state = next(s.value for s in BackendState if f" {s.value} " in row)
        assert column_at(row, f" {state} ") + 1 == state_at, row
    huge_row = next(r for r in rows if r.startswith("b" * 10))
    assert huge_row.startswith("b" * 23 + "…")
    cjk_row = next(r for r in rows if r.startswith("推"))
    assert cjk_row.startswith("推理服务器一号推理服务…  ")  # 23 cells, padded to 24, a space
    # a name with control codes shows its escaped form, the one the verbs accept
    assert any(r.startswith("b\\x1b[31m1 ") for r in rows)
    # the slot table's free-text column (its backends) is cut too
    slot_rows = [line for line in lines if line.startswith("h/gpu0")]
    assert slot_rows and all(cell_len(r) <= 160 and r.endswith("…") for r in slot_rows)


def record(**fields: str) -> AuditRecord:
    base = {"operator": "ann@h1", "event": "intent", "action": "drain", "target": "b1"}
    return AuditRecord(ts=1_700_000_000.0, digest="abc123", **{**base, **fields})


def test_audit_text_cuts_every_column_and_measures_wide_characters() -> None:
    records = [
        record(),
        record(target=HUGE, text="x" * 10_000),
        record(operator="操作员" * 10, target=CJK, fleet="生产"),
        record(target=ODD, step="draining:" + ODD, status="interrupted"),
    ]
    lines = [audit_line(r, None) for r in records]
    widths = [w for _, w in AUDIT_COLUMNS]
    # every line's columns start at the same cells: the first line's separators are the rule
    starts = [sum(widths[:i]) + 2 * i for i in range(len(widths))]
    for line in lines:
        assert cell_len(line) <= sum(widths) + 2 * len(widths) + 80 + 2 + 20, len(line)
        assert "\x1b" not in line
        cells_seen = 0
        marks = []
        for ch in line:
            marks.append(cells_seen)
            cells_seen += cell_len(ch)
        # the character at each column start begins a value (not the middle of a wide one)
        assert all(s in marks for s in starts), line
    assert "b" * 22 + "…" in lines[1] and "x" * 10 + "…" in lines[1]
    assert "操作员" in lines[2] and "…" in lines[2]
    assert "b\\x1b[31m1" in lines[3]
    # the target column holds the same cells on every line
    target_at = starts[5]
    for line, target in zip(lines, ("b1", "bbb", "推理", "b\\x1b"), strict=True):
        prefix_cells = 0
        for i, ch in enumerate(line):
            if prefix_cells == target_at:
                assert line[i:].startswith(target), (line, target)
                break
            prefix_cells += cell_len(ch)
