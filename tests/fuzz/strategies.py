"""Strategies shared by the fuzz tests: hostile text, numbers at and past every edge, TOML-like
values, and byte-level mutations of real files."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# text a fleet, a user or an attacker may hand gpucon: control and bidi characters, escapes,
# CJK, markup, very long runs
HOSTILE_PIECES = (
    "\x1b[31m",
    "\x00",
    "\x7f",
    "\x9b",
    "\u202e",
    "\u200b",
    "\n",
    "\t",
    "[bold]",
    "[/]",
    "名前",
    "😀",
    "\\",
    '"',
    "'",
    "=",
    "nan",
    "inf",
    "-1",
    "1e308",
    "1e18",
    "0",
)
# a long run (a 10 kB name): built by a function so that strategy reprs stay short
long_text = st.integers(min_value=1_000, max_value=12_000).map(lambda n: "x" * n)
hostile_text = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(HOSTILE_PIECES) | st.text(max_size=5), max_size=6).map("".join),
    long_text,
)

edge_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-9, 0.04, 0.05, 1.0, 86_400.0, 86_400.5, 1e18, 1e308, -1.0]),
)
edge_ints = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 1_000_000, 1_000_001, 2**63]),
)
number_text = st.one_of(
    edge_floats.map(repr),
    edge_ints.map(str),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "1e400", "", " ", "1_0", "0x10", "½"]),
    hostile_text,
)

toml_scalar: st.SearchStrategy[Any] = st.one_of(
    st.booleans(), edge_ints, edge_floats, hostile_text, st.just("1m"), st.just("redis://h:1/0")
)
toml_value: st.SearchStrategy[Any] = st.recursive(
    toml_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def mutated_bytes(draw: st.DrawFn, original: bytes) -> bytes:
    """``original`` with a few bytes flipped, inserted or deleted, or a span duplicated."""
    data = bytearray(original)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        where = draw(st.integers(min_value=0, max_value=max(len(data) - 1, 0)))
        how = draw(st.sampled_from(["flip", "insert", "delete", "duplicate", "number"]))
        if how == "flip" and data:
            data[where] = draw(st.integers(min_value=0, max_value=255))
        elif how == "insert":
            piece = draw(st.sampled_from(HOSTILE_PIECES[:16])).encode("utf-8", "surrogatepass")
            data[where:where] = piece
        elif how == "delete":
            del data[where : where + draw(st.integers(min_value=1, max_value=20))]
        elif how == "duplicate":
            size = draw(st.integers(min_value=1, max_value=80))
            data[where:where] = data[where : where + size]
        else:  # put an extreme number where a digit was
            digits = [i for i, b in enumerate(data) if chr(b).isdigit()]
            if digits:
                at = draw(st.sampled_from(digits))
                data[at : at + 1] = draw(st.sampled_from([b"1e18", b"nan", b"-5", b"1e308"]))
    return bytes(data)
