"""The console's first notice of a key: on the terminal's input thread, as the key is read.

Textual's driver reads the terminal in a thread of its own and queues each key for the UI
thread, behind whatever the UI thread is doing (showing a snapshot, drawing a frame). The
hub's thread and the source reads hold back while a key is answered (``Hub.ui_idle``), but
the app learns of the key only when it takes it from its queue: on a loaded machine, tens of
milliseconds in which the hub's tick and the simulator's read still share the interpreter
with the UI thread, and the snapshot queued ahead of the key is shown first. The driver
wrapped here calls ``notice`` from the input thread before queueing each key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from textual import events
from textual.driver import Driver
from textual.message import Message


def key_noticing(base: type[Driver], notice: Callable[[], object]) -> type[Driver]:
    """``base`` (the driver Textual picked) calling ``notice`` as each key is read.

    ``notice`` runs on the input thread: it must only set a flag (a ``threading.Event``).
    """

    def process_message(self: Driver, message: Message) -> None:
        if isinstance(message, events.Key):
            notice()
        base.process_message(self, message)

    return cast(
        "type[Driver]",
        type(f"KeyNoticing{base.__name__}", (base,), {"process_message": process_message}),
    )
