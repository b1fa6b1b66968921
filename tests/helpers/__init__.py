"""Test helpers: fixtures that start real servers on loopback, and stand-ins where none can run."""
