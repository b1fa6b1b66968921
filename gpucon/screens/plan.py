"""The plan/confirm screen: what an action will do, and the confirmation its tier asks for.

It shows the target, tier, preconditions (PASS; WARN: it holds with a risk; FAIL), steps,
blast radius and undo. Cancel has focus when it opens, so Enter on a stray keypress cancels.
Tier 1: an "Apply" button. Tier 2: the button names the exact target ("Drain b1"). Tier 3: a
dry-run banner and an input where the target's name must be typed before the button unlocks.
A plan with a failed precondition cannot be confirmed; one with a warning can, under a yellow
line that says so. Dismisses with True (confirmed) or False. Fleet text is ``Text``, never
markup: a str label is parsed as Textual markup, so a backend named ``b[/x]`` would crash the
screen and ``b[bold]x[/bold]`` would be shown as "bx" on the very button that must name it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from gpucon.actions.plan import Plan, Tier
from gpucon.actions.render import TIER_NAMES
from gpucon.widgets.safe_text import clean

TIER_STYLES = {
    Tier.REVERSIBLE: "bold green",
    Tier.DISRUPTIVE: "bold yellow",
    Tier.DESTRUCTIVE: "bold red",
}


VERDICT_STYLES = {"PASS": "bold green", "WARN": "bold black on yellow", "FAIL": "bold red"}


def plan_text(plan: Plan) -> Text:
    """The plan as styled text; every fleet-derived string goes through ``clean``."""
    text = Text()
    text.append(f"{plan.action} ", style="bold")
    text.append(clean(plan.target), style="bold reverse")
    text.append("   ")
    text.append(TIER_NAMES[plan.tier], style=TIER_STYLES[plan.tier])
    text.append(f"   plan {plan.digest}\n", style="dim")
    if plan.summary:
        text.append(clean(plan.summary) + "\n")
    for change in plan.changes:
        text.append("   " + clean(change) + "\n")
    text.append("\nPreconditions\n", style="bold underline")
    for p in plan.preconditions:
        text.append(f" {p.verdict} ", style=VERDICT_STYLES[p.verdict])
        text.append(f" {clean(p.name)}: {clean(p.text)}\n")
    if not plan.preconditions:
        text.append(" (none)\n", style="dim")
    text.append("\nSteps\n", style="bold underline")
    for i, step in enumerate(plan.steps, 1):
        text.append(f" {i}. ", style="bold")
        text.append(clean(step.text) + "\n")
    radius = plan.blast_radius
    text.append("\nBlast radius  ", style="bold underline")
    text.append(radius.describe() + "\n")
    if radius.backends:
        text.append(" backends: " + clean(", ".join(radius.backends)) + "\n")
    if radius.slots:
        text.append(" slots: " + clean(", ".join(radius.slots)) + "\n")
    text.append("\nUndo  ", style="bold underline")
    text.append(clean(plan.undo) + "\n")
    return text


def confirm_label(plan: Plan) -> Text:
    """The confirm button's label: ``Text``, since Textual reads a str label as markup."""
    if plan.tier is Tier.REVERSIBLE:
        return Text("Apply")
    return Text(f"{plan.action.capitalize()} {clean(plan.target)}")


def typed_name_matches(plan: Plan, typed: str) -> bool:
    """Tier 3: the operator typed the target's name as the screen shows it (cleaned)."""
    return typed.strip() == clean(plan.target).strip()


class PlanScreen(ModalScreen[bool]):
    """Shows a plan and asks for the confirmation its tier needs."""

    DEFAULT_CSS = """
    PlanScreen { align: center middle; }
    PlanScreen #plan-box {
        width: 90%; max-width: 120; height: auto; max-height: 95%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    PlanScreen #plan-scroll { height: auto; max-height: 70vh; }
    PlanScreen #plan-body { height: auto; }
    PlanScreen #dry-run { color: $warning; text-style: bold; height: auto; }
    PlanScreen #confirm-name { margin: 1 0 0 0; }
    PlanScreen #plan-buttons { height: auto; align-horizontal: right; margin: 1 0 0 0; }
    PlanScreen #plan-buttons Button { margin: 0 0 0 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="cancel_plan"),
        Binding("up", "scroll_plan(-1)", "Scroll up", show=False, id="plan_up"),
        Binding("down", "scroll_plan(1)", "Scroll down", show=False, id="plan_down"),
        Binding("pageup", "scroll_plan(-10)", "Page up", show=False, id="plan_page_up"),
        Binding("pagedown", "scroll_plan(10)", "Page down", show=False, id="plan_page_down"),
    ]
    AUTO_FOCUS = "#cancel"

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        plan = self.plan
        with Vertical(id="plan-box"):
            if plan.tier is Tier.DESTRUCTIVE:
                yield Static(
                    Text("DRY RUN: this is what would happen; nothing has changed yet."),
                    id="dry-run",
                )
            with VerticalScroll(id="plan-scroll"):  # long plans scroll; the buttons stay
                yield Static(plan_text(plan), id="plan-body")
            if not plan.ok:
                yield Static(
                    Text("A precondition failed: this plan cannot be applied.", style="bold red"),
                    id="plan-blocked",
                )
            elif plan.warnings:
                count = len(plan.warnings)
                yield Static(
                    Text(
                        f"{count} warning(s): it can be applied, but read the WARN line(s) first.",
                        style="bold yellow",
                    ),
                    id="plan-warned",
                )
            if plan.tier is Tier.DESTRUCTIVE:
                yield Input(placeholder=f"type {clean(plan.target)} to unlock", id="confirm-name")
            with Horizontal(id="plan-buttons"):
                yield Button(Text("Cancel"), id="cancel", variant="primary")
                yield Button(
                    confirm_label(plan),
                    id="confirm",
                    variant="error" if plan.tier >= Tier.DISRUPTIVE else "warning",
                    disabled=not plan.ok or plan.tier is Tier.DESTRUCTIVE,
                )

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "confirm-name":
            typed = typed_name_matches(self.plan, event.value)
            self.query_one("#confirm", Button).disabled = not (typed and self.plan.ok)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm" and not event.button.disabled:
            self.dismiss(True)
        else:
            self.dismiss(False)

    def action_scroll_plan(self, lines: int) -> None:
        """Scroll a long plan while Cancel keeps the focus."""
        scroll = self.query_one("#plan-scroll", VerticalScroll)
        scroll.scroll_relative(y=lines, animate=False)

    def action_cancel(self) -> None:
        self.dismiss(False)
