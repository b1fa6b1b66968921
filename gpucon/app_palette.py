"""What the command palette (ctrl+p) offers on the fleet screen: sort by each column,
filter, the keys' help, and (where actions are on) each action on the selected row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from textual.app import SystemCommand

from gpucon.screens.fleet import ActionFleetScreen, FleetScreen
from gpucon.widgets.slot_rows import COLUMNS


def fleet_commands(
    fleet: FleetScreen, actions: Sequence[str], on_help: Callable[[], object]
) -> Iterator[SystemCommand]:
    """The fleet screen's palette entries; ``actions`` are offered on an action screen only."""
    for column in COLUMNS:
        yield SystemCommand(
            f"Sort by {column.title}",
            f"sort the slot table by {column.tooltip}",
            lambda key=column.key: fleet.table.set_sort(
                key,
                not fleet.table.order.reverse if key == fleet.table.order.sort_key else True,
            ),
        )
    yield SystemCommand(
        "Filter slots", "filter by host, slot, backend or model", fleet.action_filter
    )
    yield SystemCommand("Clear filter", "show every slot", fleet.action_clear_filter)
    yield SystemCommand("Keys", "every key and its binding id, and what each column means", on_help)
    if isinstance(fleet, ActionFleetScreen):
        for name in actions:
            yield SystemCommand(
                name.capitalize(),
                f"{name} the selected slot's backend",
                lambda name=name: fleet.action_act(name),
            )
        yield SystemCommand(
            "Re-slice MIG",
            "cut the selected row's GPU into a new MIG layout (type its name to confirm)",
            fleet.action_reslice,
        )
