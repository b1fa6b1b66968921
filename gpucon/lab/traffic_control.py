"""The lab's traffic rate while it runs: what the operator types into the lab's terminal.

A lab is where one tries the console against a spike before the night it happens, so the
rate can change without restarting the stack (which would empty the queue, the registry and
Prometheus' history): ``rate 80`` sets the total requests a second (``0`` pauses),
``spike 200 30`` sends 200 a second for 30 seconds and then goes back to the rate before.
Parsing is pure (``parse_command``); ``RateControl`` is the one value the generators read,
with an event that wakes a generator waiting for its next request.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

HELP = "commands: rate N (requests/s, 0 pauses) | spike N SECONDS | help"
# a lab on loopback: beyond this the generator, not the fleet, is what is measured
MAX_RATE_PER_S = 10_000.0


@dataclass(frozen=True, slots=True)
class SetRate:
    """``rate N``: the total rate from now on."""

    rate_per_s: float


@dataclass(frozen=True, slots=True)
class Spike:
    """``spike N S``: ``rate_per_s`` for ``seconds``, then the rate before it."""

    rate_per_s: float
    seconds: float


@dataclass(frozen=True, slots=True)
class ShowHelp:
    """``help``: what can be typed."""


Command = SetRate | Spike | ShowHelp


def _number(field: str, text: str, *, positive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{field}: expected a number {bound}, got {text!r}")
    return value


def _rate(text: str) -> float:
    rate = _number("rate", text, positive=False)
    if rate > MAX_RATE_PER_S:
        raise ValueError(f"rate: at most {MAX_RATE_PER_S:g} requests/s, got {text!r}")
    return rate


def parse_command(line: str) -> Command | None:
    """One typed line -> its command (None for an empty line); ValueError names the field."""
    words = line.split()
    if not words:
        return None
    verb, args = words[0].lower(), words[1:]
    if verb in ("help", "?"):
        return ShowHelp()
    if verb == "rate":
        if len(args) != 1:
            raise ValueError(f"rate: expected `rate N`, got {line.strip()!r}")
        return SetRate(_rate(args[0]))
    if verb == "spike":
        if len(args) != 2:
            raise ValueError(f"spike: expected `spike N SECONDS`, got {line.strip()!r}")
        return Spike(_rate(args[0]), _number("seconds", args[1], positive=True))
    raise ValueError(f"unknown command {words[0]!r}; {HELP}")


class RateControl:
    """The rate one generator sends at, changed while it runs; ``changed`` wakes it."""

    def __init__(self, rate_per_s: float) -> None:
        self.rate_per_s = rate_per_s
        self.changed = asyncio.Event()

    def set(self, rate_per_s: float) -> None:
        self.rate_per_s = rate_per_s
        self.changed.set()


class TypedRate:
    """Applies typed commands to the generators' controls (one per model, sharing the total
    evenly) and says what it did; a spike goes back to the rate before it when it ends."""

    def __init__(
        self,
        rate_per_s: float,
        models: int,
        loop: asyncio.AbstractEventLoop,
        say: Callable[[str], None] = lambda text: print(text, flush=True),
    ) -> None:
        self.models = models
        self.controls = [RateControl(rate_per_s / models) for _ in range(models)]
        self.rate_per_s = rate_per_s
        self.loop = loop
        self.say = say
        # set when the generators have ended (count or duration): nothing left to change
        self.ended = False
        self._spike_end: asyncio.TimerHandle | None = None
        # the rate a spike goes back to (the one set before the first spike of a run of them)
        self._after_spike = rate_per_s

    def apply_soon(self, line: str) -> None:
        """From any thread: ``apply(line)`` on the generators' loop. Once the traffic has ended
        its loop is closed: the line is answered here ("ended", or what is wrong with it), not
        dropped without a word while the lab runs on."""
        try:
            self.loop.call_soon_threadsafe(self.apply, line)
        except RuntimeError:  # the loop is closed: the generators are done
            self.ended = True
            self.apply(line)

    def apply(self, line: str) -> None:
        try:
            command = parse_command(line)
        except ValueError as exc:
            self.say(f"traffic: {exc}")
            return
        if command is None:
            return
        if isinstance(command, ShowHelp):
            now = "ended, nothing sent" if self.ended else f"{self.rate_per_s:g} req/s now"
            self.say(f"traffic: {now}; {HELP}")
            return
        if self.ended:
            self.say("traffic: ended (--duration or --count reached); restart the lab for more")
            return
        if isinstance(command, Spike):
            if self._spike_end is None:
                self._after_spike = self.rate_per_s
            else:
                self._spike_end.cancel()
            self._set(command.rate_per_s)
            self._spike_end = self.loop.call_later(command.seconds, self._end_spike)
            self.say(
                f"traffic: spike, {command.rate_per_s:g} req/s for {command.seconds:g} s, "
                f"then {self._after_spike:g}"
            )
            return
        if self._spike_end is not None:  # a rate typed during a spike ends it
            self._spike_end.cancel()
            self._spike_end = None
        self._set(command.rate_per_s)
        rate = command.rate_per_s
        self.say(f"traffic: {rate:g} req/s" if rate else "traffic: paused")

    def _end_spike(self) -> None:
        self._spike_end = None
        self._set(self._after_spike)
        self.say(f"traffic: spike over, back to {self._after_spike:g} req/s")

    def _set(self, rate_per_s: float) -> None:
        self.rate_per_s = rate_per_s
        for control in self.controls:
            control.set(rate_per_s / self.models)


def read_lines(stream: TextIO | None, on_line: Callable[[str], None]) -> None:
    """Hand each line of ``stream`` (the lab's terminal) to ``on_line`` from a daemon thread:
    a blocked read never holds the lab's exit. A closed or absent stdin reads nothing."""
    if stream is None:
        return

    def pump() -> None:
        try:
            for line in stream:
                on_line(line)
        except (OSError, ValueError, RuntimeError):  # closed stream or loop: nothing to do
            return

    threading.Thread(target=pump, name="lab-typed-rate", daemon=True).start()
