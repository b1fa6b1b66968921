"""The write side, one module per system. Never constructed in read-only mode."""
