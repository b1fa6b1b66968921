"""The plan's editable params: one input per param, and the error that names a bad one.

An action that lets the operator change its params in the plan (the probe: count, rate,
concurrency, duration, timeout; drain, undrain, MPS restart and re-slice: the reason recorded)
gets this form under its plan. The values are sent back to the
action's pure ``plan`` as typed text; the action checks them and a ``BadParams`` names the
field, which is marked here with the message, and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Static

from gpucon.errors import JsonValue
from gpucon.widgets.safe_text import clean

UNITS = {"rate": "/s", "duration": "s", "timeout": "s"}
# free-text params: left blank, the action's own default applies (the plan shows it)
TEXT_FIELDS = frozenset({"reason"})


def shown_value(value: JsonValue) -> str:
    """A param's value as the input shows it (``20`` not ``20.0``)."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return f"{value:g}"
    return str(value)


class ParamsForm(Vertical):
    """Inputs for ``fields`` with the plan's values; ``values()`` reads them back."""

    DEFAULT_CSS = """
    ParamsForm { height: auto; margin: 1 0 0 0; }
    ParamsForm #param-row { height: auto; }
    ParamsForm .param { width: 1fr; height: auto; }
    ParamsForm .param Input { width: 100%; }
    ParamsForm .param Input.-invalid { border: tall $error; }
    ParamsForm #param-error { color: $error; text-style: bold; height: auto; }
    ParamsForm #param-hint { color: $text-muted; height: auto; }
    """

    def __init__(self, fields: Sequence[str], values: Mapping[str, JsonValue]) -> None:
        super().__init__(id="plan-params")
        self.fields = tuple(fields)
        self.initial = {name: shown_value(values.get(name)) for name in self.fields}

    def compose(self) -> ComposeResult:
        with Horizontal(id="param-row"):
            for name in self.fields:
                with Vertical(classes="param"):
                    unit = UNITS.get(name)
                    yield Label(Text(f"{name} ({unit})" if unit else name))
                    yield Input(self.initial[name], id=f"param-{name}", compact=True)
        yield Static(
            Text("Tab to a field; Enter shows the plan again; Apply uses these values"),
            id="param-hint",
        )
        yield Static(Text(""), id="param-error")

    def typed(self) -> dict[str, str]:
        return {name: self.query_one(f"#param-{name}", Input).value for name in self.fields}

    def values(self) -> dict[str, str]:
        """The values to make the plan with; a blank free-text field is left out (default)."""
        return {
            name: value
            for name, value in self.typed().items()
            if value.strip() or name not in TEXT_FIELDS
        }

    def changed(self) -> dict[str, str]:
        """The values that differ from those the plan was made with."""
        return {k: v for k, v in self.typed().items() if v.strip() != self.initial[k]}

    def show(self, values: Mapping[str, JsonValue]) -> None:
        """The plan was made again: its values become the form's (a default may have moved)."""
        self.initial = {name: shown_value(values.get(name)) for name in self.fields}
        for name in self.fields:
            self.query_one(f"#param-{name}", Input).value = self.initial[name]
        self.show_error(None, "")

    def show_error(self, field: str | None, message: str) -> None:
        """Mark ``field``'s input (when it is one of the form's) and say ``message``."""
        for name in self.fields:
            self.query_one(f"#param-{name}", Input).set_class(name == field, "-invalid")
        self.query_one("#param-error", Static).update(Text(clean(message)))
        if field in self.fields:
            self.query_one(f"#param-{field}", Input).focus()
