"""Textual screens: fleet, detail, plan/confirm, progress, audit, help."""
