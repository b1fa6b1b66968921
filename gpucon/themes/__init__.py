"""Textual themes (dark, light, high-contrast NOC) and app variables for hot, breach, stale."""
