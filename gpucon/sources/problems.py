"""Problems found while reading a source: counted, the first few kept, summarised in one line.

A source that meets garbage (a NaN, a non-numeric weight, a series without labels) skips the
bad value, notes the problem here and reports itself degraded with ``summary()`` as its error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_SHOWN = 3


@dataclass
class Problems:
    items: list[str] = field(default_factory=list)
    count: int = 0
    # every problem, not only those shown (sources that cache parsed results replay them)
    all: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.count += 1
        self.all.append(text)
        if len(self.items) < MAX_SHOWN:
            self.items.append(text)

    def summary(self) -> str | None:
        if not self.count:
            return None
        more = f" (+{self.count - len(self.items)} more)" if self.count > len(self.items) else ""
        return "; ".join(self.items) + more
