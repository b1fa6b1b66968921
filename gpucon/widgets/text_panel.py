"""``TextPanel``: a Static showing one ``rich.text.Text`` that repaints only what changed.

The status bar, the bottom's panels, the detail screen's and the plots are TextPanels. Its own
module, so that the status bar (in the first frame) does not import the bottom's panels
(mounted after it).
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Region
from textual.widgets import Static

from gpucon.widgets.text_diff import changed_cells


class TextPanel(Static):
    """A Static that repaints only the cells of its Text that changed.

    Textual writes to the terminal the regions a widget marks dirty; a whole-widget refresh
    rewrites every line it covers, blank ones too. So a changed text marks only its changed
    run on each changed line (``text_diff``), and the whole panel only when it must be laid
    out again or has no size yet.
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes)
        self._text = Text()
        self._shown: tuple[str, tuple[object, ...]] | None = None
        self._lines = -1  # how many line breaks the text shown has

    def render(self) -> Text:
        return self._text

    def show_text(self, text: Text) -> None:
        key = (text.plain, tuple(text.spans))
        if key == self._shown:
            return
        lines = key[0].count("\n")
        # a layout pass reflows the whole screen: only when the text can change the
        # panel's size (its height follows its lines; lines never wrap here)
        styles = self.styles
        auto_width = styles.width is not None and styles.width.is_auto
        auto_height = styles.height is not None and styles.height.is_auto
        layout = auto_width or (auto_height and lines != self._lines)
        first = self._shown is None
        before, self._text = self._text, text
        self._shown, self._lines = key, lines
        width, height = self.size
        if layout or first or not width or not height:
            self.refresh(layout=layout)
            return
        regions = []
        for y, x, cells in changed_cells(before, text):
            if y >= height:
                break
            # a run that reaches past the edge repaints the last cell too: a line cut at the
            # panel's width may end in an ellipsis there
            start = min(x, width - 1)
            end = min(x + cells, width)
            regions.append(Region(start, y, end - start, 1))
        if regions:
            self.refresh(*regions)

    def theme_style(self, name: str) -> str:
        """A theme variable's colour as a Rich style (``$util-hot`` and friends)."""
        value = self.app.theme_variables.get(name)
        return f"bold {value}" if value else "bold"
