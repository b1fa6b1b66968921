"""The schedulers' heartbeat: how a console knows the in-flight counts are still kept.

``gpucon:inflight`` holds what the scheduler's scripts counted; when the scheduler dies the
counts stop moving and look exactly like a quiet fleet. So a scheduler that honours the
contract writes, at least every ``every_s`` seconds, one field of the ``gpucon:schedulers``
hash: its consumer name -> JSON ``{"at": epoch seconds, "every_s": seconds}``. It leaves the
field in place when it stops (a stopped scheduler keeps nothing current either).

The console reads the hash with the registry's tick (one ``HGETALL``) and keeps the newest
heartbeat: the counts are current while some scheduler beats. A missing hash means a scheduler
that does not write one: its liveness is unknown, not dead, and nothing is marked for it. A
field that does not hold the contract's JSON is named as a problem and ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import msgspec

from gpucon.registry import keys

# the reference scheduler's cadence; a heartbeat older than two of its ``every_s`` (plus the
# console's read lag) is silent
DEFAULT_EVERY_S = 1.0


class Heartbeat(msgspec.Struct, frozen=True, gc=False):
    """The newest heartbeat of the schedulers' hash."""

    scheduler: str
    at: float  # epoch seconds, on the scheduler's clock
    every_s: float


def heartbeat_text(at: float, every_s: float = DEFAULT_EVERY_S) -> str:
    """What a scheduler writes as its field's value."""
    return json.dumps({"at": round(at, 3), "every_s": every_s}, separators=(",", ":"))


def _number(body: Mapping[str, object], field: str) -> float | None:
    value = body.get(field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer JSON allows and no float holds
        return None
    return number if math.isfinite(number) and number >= 0 else None


def parse_heartbeats(raw: Mapping[str, str]) -> tuple[Heartbeat | None, tuple[str, ...]]:
    """The newest heartbeat of ``gpucon:schedulers`` (decoded field -> value), or None when no
    field holds one, and what was wrong with the fields that do not."""
    newest: Heartbeat | None = None
    problems: list[str] = []
    for name, value in raw.items():
        try:
            body = json.loads(value)
        except ValueError:
            body = None
        at = _number(body, "at") if isinstance(body, dict) else None
        every = _number(body, "every_s") if isinstance(body, dict) else None
        if at is None or not every:
            problems.append(
                f"{keys.SCHEDULERS} {name!r:.40}: expected "
                f'{{"at": epoch seconds, "every_s": seconds > 0}}, got {value!r:.40}'
            )
            continue
        if newest is None or at > newest.at:
            newest = Heartbeat(name, at, every)
    return newest, tuple(problems)
