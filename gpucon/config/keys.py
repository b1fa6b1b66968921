"""The binding ids a config's ``[keys]`` table may remap, known without importing the UI.

``gpucon config check`` validates ``[keys]`` against this set; a UI test keeps it equal to the
ids the screens actually bind, so the two cannot drift.
"""

from __future__ import annotations

BINDING_IDS: frozenset[str] = frozenset(
    {
        # the console
        *("help", "command_palette", "theme", "quit", "audit"),
        # the fleet table
        *("cursor_up", "cursor_down", "page_up", "page_down", "first_row", "last_row"),
        *("open_detail", "sort", "sort_reverse", "filter", "clear_filter", "pause"),
        # the alerts list
        *("focus_alerts", "goto_alert", "alert_up", "alert_down", "alert_jump"),
        # actions (bound only when the console may write)
        *("drain", "undrain", "rebalance", "probe"),
        # the detail, help, plan, progress and audit screens
        *("back", "close_help", "cancel_plan", "plan_up", "plan_down"),
        *("plan_page_up", "plan_page_down", "close_progress", "close_audit", "reload_audit"),
    }
)
