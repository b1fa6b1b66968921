"""What a headless app would have written to its terminal, frame by frame, and the screen it
would have left there.

``TerminalSpy(app)`` wraps the app's display step: each screen update Textual makes is
rendered to the escape sequences a real terminal would be sent (``render_segments``, as the
app does when it has a terminal), counted (bytes, lines, cells) and played onto a small
character grid (cursor moves and text; colours are dropped). A test can then ask how much a
tick wrote and whether the grid still matches what a full repaint draws.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from textual._compositor import CompositorUpdate
from textual.app import App
from textual.screen import Screen

# a cursor move (CSI row;col H), any other escape sequence, or a run of text
_TOKEN = re.compile(r"\x1b\[(\d+);(\d+)H|\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[^\[]|\n|[^\x1b\n]+")


@dataclass
class Frame:
    """One update sent to the terminal."""

    bytes: int
    lines: set[int] = field(default_factory=set)
    cells: int = 0


class TerminalSpy:
    def __init__(self, app: App[Any]) -> None:
        width, height = 300, 120  # larger than any test's terminal: the app crops to its own
        self.grid = [[" "] * width for _ in range(height)]
        self.frames: list[Frame] = []
        self._app = app
        self._display = app._display
        app._display = self._spy  # type: ignore[method-assign]

    def _spy(self, screen: Screen[Any], renderable: Any) -> None:
        if isinstance(renderable, CompositorUpdate):
            self.feed(renderable.render_segments(self._app.console))
        self._display(screen, renderable)

    def feed(self, data: str) -> None:
        frame = Frame(len(data.encode()))
        x = y = 0
        for match in _TOKEN.finditer(data):
            token = match.group(0)
            if match.group(1) is not None:
                y, x = int(match.group(1)) - 1, int(match.group(2)) - 1
            elif token.startswith("\x1b") or token == "\n":
                continue  # colours and styles; every line Textual writes starts with a move
            else:
                for ch in token:
                    self.grid[y][x] = ch
                    width = cell_len(ch)
                    if width == 2:
                        self.grid[y][x + 1] = ""
                    frame.lines.add(y)
                    frame.cells += width
                    x += width
        self.frames.append(frame)

    def rows(self, width: int, height: int) -> list[str]:
        return ["".join(row[:width]) for row in self.grid[:height]]

    def take(self) -> list[Frame]:
        """The frames written since the last take."""
        frames, self.frames = self.frames, []
        return frames
