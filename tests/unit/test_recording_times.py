"""Times on the command line (``--at``) read against a recording's span."""

from __future__ import annotations

import datetime as dt

import pytest

from gpucon.recording.times import TimeError, parse_time

START = dt.datetime(2026, 12, 1, 23, 50, 0).timestamp()
SPAN = (START, START + 1800.0)  # 23:50 to 00:20 the next day, local time


def test_epoch_offsets_and_dates() -> None:
    assert parse_time("1796144138.5", SPAN) == 1796144138.5
    assert parse_time("+90", SPAN) == START + 90
    assert parse_time("+1:30", SPAN) == START + 90
    assert parse_time("+0:01:30", SPAN) == START + 90
    assert parse_time("2026-12-01 23:55:00", SPAN) == START + 300
    assert parse_time("2026-12-01T23:55", SPAN) == START + 300


def test_a_time_of_day_falls_in_the_recording_across_midnight() -> None:
    assert parse_time("23:55", SPAN) == START + 300
    assert parse_time("00:10:00", SPAN) == START + 1200  # the second day


@pytest.mark.parametrize("text", ["", "yesterday", "+ten", "12:-1", "nan", "inf", "1:2:3:4"])
def test_what_cannot_be_read_says_what_can(text: str) -> None:
    with pytest.raises(TimeError, match="expected epoch seconds"):
        parse_time(text, SPAN)
