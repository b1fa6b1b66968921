"""The lab's typed traffic commands: parsed with errors that name the field, applied to the
generators' controls, a spike going back to the rate before it."""

from __future__ import annotations

import asyncio
import io

import pytest

from gpucon.lab.traffic_control import (
    SetRate,
    ShowHelp,
    Spike,
    TypedRate,
    parse_command,
    read_lines,
)


def test_commands_parse() -> None:
    assert parse_command("rate 80") == SetRate(80.0)
    assert parse_command("  RATE 0 \n") == SetRate(0.0)
    assert parse_command("spike 200 30") == Spike(200.0, 30.0)
    assert parse_command("help") == ShowHelp()
    assert parse_command("?") == ShowHelp()
    assert parse_command("   \n") is None


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("rate", "rate"),
        ("rate fast", "rate"),
        ("rate -3", "rate"),
        ("rate nan", "rate"),
        ("rate inf", "rate"),
        ("rate 1e9", "rate"),
        ("spike 100", "spike"),
        ("spike 100 0", "seconds"),
        ("spike lots 10", "rate"),
        ("burst 10", "unknown command 'burst'"),
    ],
)
def test_bad_commands_are_refused_naming_the_field(line: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse_command(line)


async def test_rates_are_shared_between_models_and_a_spike_goes_back() -> None:
    said: list[str] = []
    typed = TypedRate(30.0, 3, asyncio.get_running_loop(), said.append)
    assert [c.rate_per_s for c in typed.controls] == [10.0, 10.0, 10.0]
    typed.apply("rate 60")
    assert [c.rate_per_s for c in typed.controls] == [20.0, 20.0, 20.0]
    assert all(c.changed.is_set() for c in typed.controls)
    typed.apply("spike 300 0.05")
    typed.apply("spike 600 0.1")  # a second spike still goes back to 60, not to 300
    assert typed.rate_per_s == 600.0
    for _ in range(100):
        if typed.rate_per_s != 600.0:
            break
        await asyncio.sleep(0.02)
    assert typed.rate_per_s == 60.0
    assert [c.rate_per_s for c in typed.controls] == [20.0, 20.0, 20.0]
    assert said[-1] == "traffic: spike over, back to 60 req/s"


async def test_a_rate_typed_during_a_spike_ends_it() -> None:
    said: list[str] = []
    typed = TypedRate(10.0, 1, asyncio.get_running_loop(), said.append)
    typed.apply("spike 100 0.05")
    typed.apply("rate 0")
    await asyncio.sleep(0.15)
    assert typed.rate_per_s == 0.0
    assert said[-1] == "traffic: paused"


async def test_bad_lines_and_an_ended_run_change_nothing() -> None:
    said: list[str] = []
    typed = TypedRate(10.0, 1, asyncio.get_running_loop(), said.append)
    typed.apply("rate -1")
    typed.apply("")
    assert typed.rate_per_s == 10.0 and not typed.controls[0].changed.is_set()
    assert said == ["traffic: rate: expected a number >= 0, got '-1'"]
    typed.ended = True
    typed.apply("rate 50")
    assert typed.rate_per_s == 10.0
    assert "ended" in said[-1]


async def test_lines_typed_reach_the_loop_from_the_reading_thread() -> None:
    loop = asyncio.get_running_loop()
    said: list[str] = []
    typed = TypedRate(5.0, 1, loop, said.append)
    read_lines(io.StringIO("rate 7\nhelp\n"), typed.apply_soon)
    for _ in range(100):
        if len(said) == 2:
            break
        await asyncio.sleep(0.01)
    assert typed.rate_per_s == 7.0
    assert said[0] == "traffic: 7 req/s"
    assert said[1].startswith("traffic: 7 req/s now; commands: rate N")
    read_lines(None, typed.apply_soon)  # no stdin: nothing to read, no error


def test_a_line_typed_after_the_traffic_ended_is_answered() -> None:
    """The lab's traffic ends (--duration, --count) and its loop closes while the lab runs on:
    a `rate 30` typed then said nothing at all (the reading thread died on the closed loop)."""
    import threading

    loop = asyncio.new_event_loop()
    said: list[str] = []
    answered = threading.Event()

    def say(text: str) -> None:
        said.append(text)
        answered.set()

    typed = TypedRate(20.0, 1, loop, say)
    loop.close()
    read_lines(io.StringIO("rate 30\nhelp\n"), typed.apply_soon)
    assert answered.wait(5.0)
    for _ in range(500):  # both lines, from the reading thread
        if len(said) == 2:
            break
        threading.Event().wait(0.01)
    assert said[0].startswith("traffic: ended (--duration or --count reached)")
    assert said[1].startswith("traffic: ended, nothing sent; commands:")
    assert typed.rate_per_s == 20.0
