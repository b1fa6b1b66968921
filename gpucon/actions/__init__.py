"""Guarded operations: pure ``plan`` and ``apply`` through controls, with guard, audit and lock."""
