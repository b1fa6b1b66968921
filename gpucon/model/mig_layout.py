"""MIG layouts as operators write them: ``3g.40gb+2g.20gb+2x1g.10gb``, ``4g.40gb@0+1g.10gb@5``.

A layout is a list of GPU-instance profiles, each optionally pinned to a start slice (``@N``).
Items are joined by ``+`` (or ``,``); a count is written ``2x``, ``2×`` or ``2*``. A ``+``
followed by a letter belongs to the profile's name (``1g.10gb+me``, ``1g.18gb+me``), never
separates items: every item starts with a digit. ``MIG `` before a name is accepted (NVML's
spelling). Pure: no IO; ``LayoutError`` names the item that is wrong.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import msgspec

MAX_LAYOUT_CHARS = 512
MAX_ITEMS = 16  # no MIG GPU has more than 7 instances; 16 leaves room to be told why not
_PROFILE = re.compile(r"^\d{1,2}g\.\d{1,4}gb(\+[a-z][a-z0-9.]{0,15})*$")
_COUNT = re.compile(r"^(\d{1,2})\s*[x×*]\s*(.+)$")


class LayoutError(ValueError):
    """A layout that cannot be read; the message names the item and what was expected."""


class LayoutItem(msgspec.Struct, frozen=True, gc=False):
    """One GPU instance wanted: its profile's name and, if pinned, its start slice."""

    profile: str
    start: int | None = None

    def __str__(self) -> str:
        return self.profile if self.start is None else f"{self.profile}@{self.start}"


def _tokens(text: str) -> list[str]:
    """Split on ``+``/``,``; a ``+`` followed by a letter stays inside the profile name."""
    raw = [t.strip() for t in re.split(r"[+,]", text)]
    tokens: list[str] = []
    for token in raw:
        if token and token[0].isalpha() and tokens and not token.lower().startswith("mig "):
            tokens[-1] = f"{tokens[-1]}+{token}"  # "1g.10gb" "+me" -> "1g.10gb+me"
        else:
            tokens.append(token)
    return tokens


def _item(token: str, position: int) -> list[LayoutItem]:
    count = 1
    body = token
    match = _COUNT.match(token)
    if match:
        count, body = int(match.group(1)), match.group(2).strip()
        if count < 1:
            raise LayoutError(f"item {position + 1} ({token!r}): a count must be at least 1")
    name, at, start_text = body.partition("@")
    name = name.strip()
    if name[:4].lower() == "mig ":
        name = name[4:].strip()
    name = name.lower()
    start: int | None = None
    if at:
        if not start_text.strip().isdigit() or len(start_text.strip()) > 2:
            raise LayoutError(
                f"item {position + 1} ({token!r}): expected a start slice after '@', like 3g.40gb@4"
            )
        start = int(start_text.strip())
        if count > 1:
            raise LayoutError(
                f"item {position + 1} ({token!r}): a pinned start (@{start}) names one "
                "instance; write each one with its own start"
            )
    if not _PROFILE.match(name):
        raise LayoutError(
            f"item {position + 1} ({token!r}): expected a profile like 3g.40gb or 1g.10gb+me, "
            "optionally with a count (2x3g.40gb) or a start (3g.40gb@4)"
        )
    return [LayoutItem(name, start)] * count


def parse_layout(text: object) -> tuple[LayoutItem, ...]:
    """The instances a layout string asks for, in the order written (counts expanded)."""
    if not isinstance(text, str) or not text.strip():
        raise LayoutError("the layout is empty: name at least one profile, like 2x3g.40gb")
    if len(text) > MAX_LAYOUT_CHARS:
        raise LayoutError(f"the layout is longer than {MAX_LAYOUT_CHARS} characters")
    if any(not (c.isprintable() or c == " ") for c in text):
        raise LayoutError("the layout must not contain control characters")
    items: list[LayoutItem] = []
    for position, token in enumerate(_tokens(text)):
        if not token:
            raise LayoutError(f"item {position + 1} is empty (two separators in a row?)")
        items.extend(_item(token, position))
        if len(items) > MAX_ITEMS:
            raise LayoutError(f"the layout asks for more than {MAX_ITEMS} instances")
    return tuple(items)


def format_layout(items: Iterable[LayoutItem]) -> str:
    """``1x3g.40gb+1x2g.20gb+2x1g.10gb``: unpinned items counted, pinned ones each with its
    start."""
    listed = list(items)
    counts = Counter(i.profile for i in listed if i.start is None)
    parts = [f"{n}x{name}" for name, n in counts.items()]
    parts.extend(str(i) for i in listed if i.start is not None)
    return "+".join(parts)


def describe_counts(names: Iterable[str]) -> str:
    """``3 × 3g.71gb`` or ``1 × 3g.40gb + 1 × 2g.20gb + 2 × 1g.10gb``: a layout's profiles
    counted."""
    counts = Counter(names)
    return " + ".join(f"{n} × {name}" for name, n in counts.items())
