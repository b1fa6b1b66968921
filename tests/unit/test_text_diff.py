"""The changed run of each changed line: what a panel repaints instead of its whole region."""

from __future__ import annotations

from rich.text import Text

from gpucon.widgets.text_diff import changed_cells


def styled(plain: str, *spans: tuple[int, int, str]) -> Text:
    text = Text(plain)
    for start, end, style in spans:
        text.stylize(style, start, end)
    return text


def test_equal_texts_change_nothing() -> None:
    assert changed_cells(Text("a\nb c"), Text("a\nb c")) == []
    # the same cells, spans split differently: nothing to repaint
    assert (
        changed_cells(
            styled("abcd", (0, 4, "bold")), styled("abcd", (0, 2, "bold"), (2, 4, "bold"))
        )
        == []
    )


def test_one_digit_is_one_cell_of_one_line() -> None:
    old = Text("GPU      TEMP\nvm/gpu0  58°C\n\n")
    new = Text("GPU      TEMP\nvm/gpu0  59°C\n\n")
    assert changed_cells(old, new) == [(1, 10, 1)]


def test_shorter_and_longer_lines_cover_the_cells_that_went_or_came() -> None:
    assert changed_cells(Text("abcd"), Text("abc")) == [(0, 3, 1)]
    assert changed_cells(Text("abc"), Text("abcde")) == [(0, 3, 2)]
    assert changed_cells(Text(" <2s ok"), Text("<10s ok")) == [(0, 0, 3)]
    # a change of length moves what follows it: repainted to the end of the longer line
    assert changed_cells(Text("(6: 2 warn)"), Text("(10: 6 warn)")) == [(0, 1, 11)]
    assert changed_cells(Text("x, 50s ago"), Text("x, 1m ago")) == [(0, 3, 7)]
    # lines that went are blanked, lines that came are drawn
    assert changed_cells(Text("a\nbb\nccc"), Text("a")) == [(1, 0, 2), (2, 0, 3)]
    assert changed_cells(Text("a"), Text("a\n\nxy")) == [(2, 0, 2)]


def test_a_style_change_alone_is_a_change() -> None:
    old = styled("WARN 10s gpu0", (0, 4, "yellow"))
    new = styled("WARN 10s gpu0", (0, 4, "red"))
    assert changed_cells(old, new) == [(0, 0, 4)]
    assert changed_cells(Text("abc", style="dim"), Text("abc")) == [(0, 0, 3)]


def test_cells_are_counted_in_terminal_cells() -> None:
    # a wide character before the change moves it two cells, not one
    assert changed_cells(Text("名 1"), Text("名 2")) == [(0, 3, 1)]
    assert changed_cells(Text("a1"), Text("a名")) == [(0, 1, 2)]
