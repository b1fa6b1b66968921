"""When the console's cyclic garbage collector runs: between two ticks, on the hub's thread.

At 2,048 GPUs a young collection walks every entity the ticks made since the last one
(~100,000 objects) and takes 40 to 230 ms; left to its allocation counter it started in the
middle of a tick (two snapshots alive) or of a frame, and a key that landed then waited for it.
The console raises the automatic threshold to ``BACKSTOP_YOUNG`` (so that it is only a
backstop) and the hub's thread calls ``collect_between_ticks`` just before each tick, when the
UI is not answering a key: one snapshot is alive then, the UI has drawn the last one, and the
collection runs once per ``YOUNG_THRESHOLD`` allocations, as before, so total CPU is unchanged.
While keys are being typed (one within ``TYPING_S``) the collection waits for a pause
(``collect_unless``): a young collection there stops every thread, and on a loaded machine
its 40-130 ms of CPU took 300-500 ms of wall time, which a key landing in it waited through.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

# young collections run once this many more container objects are alive than at the last one.
# A tick at 2,048 GPUs allocates a few hundred thousand objects that all die by the next one;
# at Python's default (700) most of them were promoted and walked again by full passes (20 %
# of the CPU measured at 2,048 GPUs). A young collection there walks what the last ticks made
# and is still alive (~100,000 objects, 40 to 240 ms), however often it runs: at 50,000 one ran
# every ~10 s and a key had a 1-2 % chance of landing in one; three times rarer is three times
# less CPU, and the cyclic garbage left waiting (Textual's strips, which cache themselves) is
# a few tens of thousands of small objects
YOUNG_THRESHOLD = 150_000
# young passes between middle ones, and middle ones between full ones (Python's 10)
MIDDLE_THRESHOLD = 20
OLD_THRESHOLD = 10
# the automatic threshold while the hub paces the collector: reached only when the hub's
# thread has not collected for a long while (a console without a ticking hub)
BACKSTOP_YOUNG = 4 * YOUNG_THRESHOLD
# a collection due while a key came less than this long ago waits for a pause in the typing
# (the backstop bounds how long: a few minutes of allocations at 2,048 GPUs)
TYPING_S = 2.0


def collect_between_ticks() -> int | None:
    """Run the collection the allocation counters call for, if any (the generation, else
    None); nothing while the collector is off (start-up, a key being answered, a caller that
    turned it off)."""
    if not gc.isenabled():
        return None
    young, middle, old = gc.get_count()
    if young < YOUNG_THRESHOLD:
        return None
    generation = 0
    if middle >= MIDDLE_THRESHOLD:
        generation = 2 if old >= OLD_THRESHOLD else 1
    gc.collect(generation)
    return generation


def collect_unless(typing: Callable[[], bool]) -> Callable[[], int | None]:
    """``collect_between_ticks``, put off while ``typing()`` (a key came lately)."""

    def collect() -> int | None:
        return None if typing() else collect_between_ticks()

    return collect
