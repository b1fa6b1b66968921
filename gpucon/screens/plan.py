"""The plan/confirm screen: what an action will do, and the confirmation its tier asks for.

It shows the target, tier, preconditions (PASS; WARN: it holds with a risk; FAIL), steps,
blast radius and undo. Cancel has focus when it opens, so Enter on a stray keypress cancels.
Tier 1: an "Apply" button. Tier 2: the button names the exact target ("Drain b1"). Tier 3: a
dry-run banner and an input where the target's name must be typed before the button unlocks.
A plan with a failed precondition cannot be confirmed; one with a warning can, under a yellow
line that says so. An action with editable params (the probe) shows them in a form
(``plan_params.ParamsForm``): Enter in it makes the plan again with the values typed, and Apply
does so first when they changed; a bad value is named under the form and nothing is applied.
Dismisses with True (confirmed) or False; ``plan`` is then the plan that was confirmed.
Fleet text is ``Text``, never markup: a str label is parsed as Textual markup, so a backend
named ``b[/x]`` would crash the screen and ``b[bold]x[/bold]`` would be shown as "bx" on the
very button that must name it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from gpucon.actions.plan import Plan, Tier
from gpucon.actions.render import TIER_NAMES
from gpucon.errors import ActionError, BadParams
from gpucon.screens.plan_params import ParamsForm
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

    def __init__(
        self,
        plan: Plan,
        *,
        editable: Sequence[str] = (),
        replan: Callable[[Mapping[str, str]], Plan] | None = None,
    ) -> None:
        """``replan`` makes the plan again with the form's values (a pure, quick ``plan``:
        it runs on the UI thread); without it nothing is editable."""
        super().__init__()
        self.plan = plan
        self.editable = tuple(editable) if replan is not None else ()
        self.replan = replan

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
            if self.editable:
                yield ParamsForm(self.editable, plan.params)
            yield Static(self.verdict_text(), id="plan-verdict")
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

    def verdict_text(self) -> Text:
        """Under the plan: why it cannot be applied, or that it has warnings to read."""
        if not self.plan.ok:
            return Text("A precondition failed: this plan cannot be applied.", style="bold red")
        if self.plan.warnings:
            count = len(self.plan.warnings)
            return Text(
                f"{count} warning(s): it can be applied, but read the WARN line(s) first.",
                style="bold yellow",
            )
        return Text("")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()
        if self.editable:
            self.call_after_refresh(self.fit_plan)

    def on_resize(self) -> None:
        if self.editable:
            self.call_after_refresh(self.fit_plan)

    def fit_plan(self) -> None:
        """Give the plan's text the rows the form, the verdict and the buttons leave: on a
        small terminal (80x24) the buttons must stay on screen, the plan text scrolls."""
        box = self.query_one("#plan-box", Vertical)
        scroll = self.query_one("#plan-scroll", VerticalScroll)
        others = sum(
            w.outer_size.height + w.styles.margin.top + w.styles.margin.bottom
            for w in box.children
            if w is not scroll and w.display
        )
        rows = int(self.size.height * 0.95) - 2 - others  # the box's border
        fitted = max(3, min(int(self.size.height * 0.7), rows))
        if scroll.styles.max_height is None or scroll.styles.max_height.value != fitted:
            scroll.styles.max_height = fitted

    def remake(self, force: bool = False) -> bool:
        """Make the plan again from the form's values when they changed (or ``force``);
        False when a value is refused (the form names it) and the plan stays as it was."""
        if self.replan is None or not self.editable:
            return True
        form = self.query_one(ParamsForm)
        if not force and not form.changed():
            return True
        try:
            plan = self.replan(form.values())
        except BadParams as error:
            form.show_error(error.field, str(error))
            return False
        except ActionError as error:
            form.show_error(None, str(error))
            return False
        except Exception as error:  # a plan that cannot be made must not take the screen down
            form.show_error(None, f"{type(error).__name__}: {error}")
            return False
        self.plan = plan
        self.query_one("#plan-body", Static).update(plan_text(plan))
        self.query_one("#plan-verdict", Static).update(self.verdict_text())
        form.show(plan.params)
        confirm = self.query_one("#confirm", Button)
        confirm.label = confirm_label(plan)
        confirm.disabled = not plan.ok or plan.tier is Tier.DESTRUCTIVE
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id and event.input.id.startswith("param-"):
            event.stop()
            self.remake()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "confirm-name":
            typed = typed_name_matches(self.plan, event.value)
            self.query_one("#confirm", Button).disabled = not (typed and self.plan.ok)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id != "confirm" or event.button.disabled:
            self.dismiss(False)
            return
        before = self.plan
        if not self.remake():
            return  # a refused value: named under the form, nothing applied
        if self.plan is not before and not self.plan.ok:
            return  # the new plan cannot be applied: it says why
        self.dismiss(True)

    def action_scroll_plan(self, lines: int) -> None:
        """Scroll a long plan while Cancel keeps the focus."""
        scroll = self.query_one("#plan-scroll", VerticalScroll)
        scroll.scroll_relative(y=lines, animate=False)

    def action_cancel(self) -> None:
        self.dismiss(False)
