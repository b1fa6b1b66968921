"""``gpucon audit``: the audit log's newest records, from this console's file, the fleet's
Redis stream, or both merged by time, with the status of each run (``interrupted`` when an
intent never got its outcome, ``running`` while its operator still holds the lock).

Only the standard library is imported at module level.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpucon.commands.terminal_text import safe_line as _safe
from gpucon.registry import keys

if TYPE_CHECKING:
    from gpucon.config import GpuconConfig
    from gpucon.controls.audit_log import AuditRecord

# the audit log only reads: none of the verbs' refusals, locks or steps apply to it
AUDIT_EXIT_CODES_HELP = """
  0  the records were printed (none, if the log is empty)
  1  unexpected error (the stream's Redis could not be reached, a bug)
  2  bad parameters (--limit 0) or a bad config
"""


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--limit", type=int, default=50, metavar="N", help="the newest N records (50)"
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help=f"read the fleet's Redis stream {keys.AUDIT} instead of this console's file",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="this console's file and the fleet's stream merged by time, each marked with "
        "its origin (file, redis, file+redis) — what the audit screen shows",
    )
    parser.add_argument(
        "--demo", action="store_true", help="the demo's own audit file (audit-demo.jsonl)"
    )


def _load_config(args: argparse.Namespace, *, allow_missing: bool = False) -> GpuconConfig:
    from gpucon.commands.action_context import load_config_for

    return load_config_for(args, allow_missing=allow_missing)


def run_audit(args: argparse.Namespace) -> int:
    """The newest records, oldest first; an intent that never got its outcome reads
    ``interrupted`` (or ``running`` while its operator still holds the target's lock)."""
    from gpucon.actions.audit import read_audit
    from gpucon.errors import BadParams

    if args.limit <= 0:
        raise BadParams("--limit", f"must be a positive number, got {args.limit}")
    if getattr(args, "all", False) and not args.demo:
        return _print_merged_audit(args)
    if args.stream and not args.demo:
        records = _read_stream(args)
    else:
        records = read_audit(_audit_file(args), args.limit)
    _print_records(args, records, [None] * len(records))
    return 0


def _audit_file(args: argparse.Namespace) -> Any:
    from gpucon.controls.base import audit_path_for, demo_audit_path

    config = _load_config(args, allow_missing=True)
    return demo_audit_path(config) if args.demo else audit_path_for(config)


def _print_records(args: argparse.Namespace, records: list[Any], origins: list[str | None]) -> None:
    from gpucon.actions.audit import run_statuses

    statuses = run_statuses(records, None if args.demo else _lock_holder(args))
    for record, origin, status in zip(records, origins, statuses, strict=True):
        if args.json:
            row = {**record.to_dict(), "status": status}
            print(json.dumps(row if origin is None else {**row, "origin": origin}))
        else:
            line = audit_line(record, status)
            print(line if origin is None else f"{origin:<10} {line}")


# (field, width in terminal cells) of each column of ``gpucon audit``; the text and the digest
# end the line, cut to their own widths
AUDIT_COLUMNS = (
    ("time", 23),
    ("fleet", 12),
    ("operator", 20),
    ("event", 8),
    ("action", 9),
    ("target", 24),
    ("step", 20),
    ("status", 11),
)
AUDIT_TEXT_WIDTH = 80


def audit_line(record: AuditRecord, status: str | None) -> str:
    """One audit record as a row whose columns hold their widths: every value escaped (control
    codes shown, not obeyed), cut to its column with an ellipsis, measured in terminal cells
    (a CJK character counts two)."""
    from gpucon.errors import format_ts
    from gpucon.widgets.safe_text import fit, pad

    values = {
        "time": format_ts(record.ts),
        "fleet": record.fleet or "?",
        "operator": record.operator,
        "event": record.event,
        "action": record.action,
        "target": record.target,
        "step": record.step,
        "status": record.status if status is None else status,
    }
    cells = [pad(_safe(str(values[name] or "")), width) for name, width in AUDIT_COLUMNS]
    cells.append(fit(_safe(record.text or ""), AUDIT_TEXT_WIDTH))
    if record.digest:
        cells.append(fit(f"[{_safe(record.digest)}]", 20))
    return "  ".join(cells).rstrip()


def _print_merged_audit(args: argparse.Namespace) -> int:
    from gpucon.actions.audit import merge_audit, read_audit

    local = read_audit(_audit_file(args), args.limit)
    entries = merge_audit(local, _read_stream(args), args.limit)
    _print_records(args, [e.record for e in entries], [e.origin for e in entries])
    return 0


def _lock_holder(args: argparse.Namespace) -> Callable[[str], str | None] | None:
    """Who holds a target's lock, read from the fleet's Redis (None: no Redis configured)."""
    from gpucon.actions.audit import lock_holders
    from gpucon.config.credentials import redis_client_for

    config = _load_config(args, allow_missing=True)
    if config.fleet.redis is None:
        return None
    client = redis_client_for(config.fleet.redis, client_name="gpucon-audit-read")
    return lock_holders(client)


def _read_stream(args: argparse.Namespace) -> list[Any]:
    from gpucon.actions.audit import records_from_rows
    from gpucon.config.credentials import redis_client_for
    from gpucon.controls.registry import read_audit_stream
    from gpucon.errors import Refused

    config = _load_config(args)
    if config.fleet.redis is None:
        raise Refused(f"fleet {config.fleet.name!r} has no [redis] section: no audit stream")
    client = redis_client_for(config.fleet.redis, client_name="gpucon-audit-read")
    try:
        rows = read_audit_stream(client, args.limit)
    finally:
        client.close()
    return records_from_rows(rows)
