"""Pure core: frozen records (msgspec Structs) of one fleet snapshot and pure functions over them.

Nothing in this package does IO or imports Textual.
"""
