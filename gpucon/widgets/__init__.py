"""Reusable Textual widgets: slot table, gauges, sparklines, badges."""
