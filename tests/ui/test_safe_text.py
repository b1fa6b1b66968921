"""Untrusted text: no markup, no control codes, cut by terminal cells."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console

from gpucon.widgets.safe_text import clean, fit, pad, safe


def test_markup_stays_literal() -> None:
    text = safe("[bold red]x[/]")
    assert text.plain == "[bold red]x[/]"
    assert text.spans == []
    console = Console(width=40, record=True, force_terminal=False)
    console.print(text)
    assert "[bold red]x[/]" in console.export_text()


def test_escape_sequences_and_controls_are_removed() -> None:
    assert clean("\x1b[31mred\x1b[0m") == "red"
    assert clean("a\x1b]0;pwned title\x07b") == "ab"
    assert clean("a\x1b]8;;http://x\x1b\\link") == "alink"
    assert clean("x\x9b2Jy") == "xy"
    assert clean("bell\x07 nul\x00 del\x7f c1\x85") == "bell nul del c1"
    assert clean("two\nlines\tand\rcr") == "two lines and cr"
    assert clean("rtl\u202eevil\u2066") == "rtlevil"
    assert "\x1b" not in clean("\x1bPdcs payload\x1b\\ok")


def test_plain_ascii_is_returned_unchanged() -> None:
    name = "sdxl-gpu-a-gi1"
    assert clean(name) is name
    assert clean(42) == "42"


def test_fit_cuts_by_cells_with_wide_characters() -> None:
    wide = "推理服务器" * 10 + "🚀🚀🚀"
    for width in range(1, 30):
        cut = fit(wide, width)
        assert cell_len(cut) <= width
        assert cut.endswith("…")
    assert fit("short", 10) == "short"
    assert fit("abcdef", 0) == ""


def test_pad_gives_exact_width() -> None:
    for text in ("a", "推理", "🚀x", "x" * 50):
        assert cell_len(pad(text, 7)) == 7
        assert cell_len(pad(text, 7, right=True)) == 7
    assert pad("7", 3, right=True) == "  7"
