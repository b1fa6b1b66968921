"""The key bar: one line at the bottom naming the keys the focused screen answers.

Textual's ``Footer`` mounts one widget per key and re-composes them whenever the bindings
change; drawn that way, the keys cost more start-up than the whole slot table. This bar is
one ``Static`` with one ``rich.text.Text``: the same keys (as remapped in ``[keys]``, shown
with ``App.get_key_display``), the same theme colours, the command-palette key last. A bar too
narrow for every key leaves out the least needed ones, whole keys only (never ``q Qui…``);
Help stays on the right beside the palette's key, since it lists every key the bar had no
room for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.screen import Screen
from textual.widgets import Static

if TYPE_CHECKING:
    from textual.theme import Theme


# the keys an operator needs first come first, so a narrow terminal cuts the rest: act on
# the selection, get to the trouble, hold the table; then sorting and filtering
FIRST = (
    "alert_jump",
    "open_detail",
    "drain",
    "undrain",
    "goto_alert",
    "focus_alerts",
    "pause",
    "filter",
    "sort",
)


# kept on the right beside the command palette's key, never cut: the key that lists the rest
KEPT = "help"


# (keys, command-palette key, its short form, the cell where each key's pair ends)
Parts = tuple[Text, Text, Text, tuple[int, ...]]


def _rank(binding_id: str | None) -> int:
    return FIRST.index(binding_id) if binding_id in FIRST else len(FIRST)


class KeyBar(Static):
    """The shown bindings of the screen it is on, as ``key description`` pairs."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._shown: tuple[str, tuple[object, ...]] | None = None
        # (keys, command-palette key, its short form, where each key's pair ends), built from
        # the screen's bindings; None: not built yet
        self._parts: Parts | None = None
        self._text = Text()

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        # not built here: the first render builds it, once, however many binding changes come
        # before the first frame (mounting the screen and focusing its table are two)

    def _theme_changed(self, _theme: Theme) -> None:
        self._parts = None
        self._shown = None
        self.refresh()

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        if self._parts is None:  # not drawn yet: the next render builds it
            self.refresh()
            return
        self._parts = self._build(screen)
        self._show_parts()

    def render(self) -> Text:
        if self._parts is None and self.is_attached:
            self._parts = self._build(self.screen)
            self._text = self._fit(self._parts)
            self._shown = (self._text.plain, tuple(self._text.spans))
        return self._text

    def _style(self, variable: str, bold: bool = False) -> Style:
        colour = self.app.theme_variables.get(variable)
        return Style.parse(f"{'bold ' if bold else ''}{colour or ''}".strip() or "none")

    def _build(self, screen: Screen[object]) -> Parts:
        key_style = self._style("footer-key-foreground", bold=True)
        text_style = self._style("footer-description-foreground")
        keys = Text(no_wrap=True, overflow="ellipsis", end="")
        active = screen.active_bindings
        seen: set[str] = set()
        palette = self.app.COMMAND_PALETTE_BINDING
        shown = []
        for key, (_node, binding, enabled, _tooltip) in active.items():
            if not binding.show or binding.action in seen or key == palette:
                continue
            seen.add(binding.action)
            shown.append((binding, enabled))
        shown.sort(key=lambda item: _rank(item[0].id))  # stable: the rest keep their order
        kept = [item for item in shown if item[0].id == KEPT]
        # each pair's width added as it is appended, not the whole text's measured again per
        # key: once "⏎" is in it, rich measures a text character by character
        ends: list[int] = []
        end = 0
        for binding, enabled in shown:
            if binding.id == KEPT:
                continue
            key = f" {self.app.get_key_display(binding)} "
            description = f"{binding.description} "
            keys.append(key, key_style)
            keys.append(description, text_style if enabled else "dim")
            end += cell_len(key) + cell_len(description)
            ends.append(end)
        commands = Text(end="")
        for binding, enabled in kept:  # a narrow bar cuts the keys on the left, not this one
            commands.append(f" {self.app.get_key_display(binding)} ", key_style)
            commands.append(f"{binding.description} ", text_style if enabled else "dim")
        short = commands.copy()
        if self.app.ENABLE_COMMAND_PALETTE and palette in active:
            binding = active[palette].binding
            for part in (commands, short):
                part.append("▏", text_style)
                part.append(f"{self.app.get_key_display(binding)} ", key_style)
            commands.append(f"{binding.description or 'Commands'} ", text_style)
        return keys, commands, short, tuple(ends)

    def on_resize(self) -> None:
        self._show_parts()

    def _fit(self, parts: Parts) -> Text:
        """The keys on the left, the command palette's key on the right (as Footer docks it);
        short of room, the palette's key without its word, then the last keys on the left
        left out whole."""
        keys, commands, short, ends = parts
        width = self.size.width
        if keys.cell_len + commands.cell_len > width:
            commands = short
        gap = width - keys.cell_len - commands.cell_len
        text = keys.copy()
        if commands:
            if gap < 0:  # a narrow terminal leaves out keys, never the palette's key
                room = max(0, width - commands.cell_len)
                fits = max((end for end in ends if end <= room), default=0)
                text = text[:fits]
                gap = width - fits - commands.cell_len
            text.append(" " * max(gap, 0))
            text.append_text(commands)
        return text

    def _show_parts(self) -> None:
        """Repaint the bar when what it shows changed (its size never does: one line)."""
        if self._parts is None:
            return
        text = self._fit(self._parts)
        shown = (text.plain, tuple(text.spans))
        if shown != self._shown:
            self._shown = shown
            self._text = text
            self.refresh()
