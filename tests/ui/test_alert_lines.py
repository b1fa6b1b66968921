"""A long alert message goes on under itself while the alerts panel has lines to spare, and
keeps to one line when the alerts fill the panel."""

from __future__ import annotations

from gpucon.model.alert_base import Alert, Severity
from gpucon.widgets.alert_lines import MAX_LINES, alert_lines, fit_lines

NOW = 1_000.0
LONG = Alert(
    key="stale_source:redis",
    rule="stale_source",
    target="redis",
    severity=Severity.CRITICAL,
    message="queue depth and wait unknown (gen:queue); registry not current: source stale, "
    "last good read 45s ago: ConnectionError: Error 111 connecting to 127.0.0.1:6379.",
    since=NOW - 12,
)
SHORT = Alert(
    key="xid:h/gpu0", rule="xid", target="h/gpu0", severity=Severity.WARNING,
    message="XID 79 (fell off the bus) 2m ago", since=NOW - 120,
)  # fmt: skip


def test_a_long_message_goes_on_under_itself_broken_between_words() -> None:
    lines = [t.plain for t in alert_lines(LONG, NOW, "", 86, MAX_LINES)]
    assert len(lines) == 3 and all(len(x) <= 86 for x in lines)
    assert lines[0].startswith("CRIT  10s redis  queue depth")
    indent = len("CRIT  10s redis  ")
    assert lines[1].startswith(" " * indent) and lines[1][indent] != " "
    # nothing lost, no word cut in two
    assert " ".join(" ".join(lines).split()).endswith(LONG.message)
    assert not lines[0].endswith(("regis", "regist"))


def test_one_line_when_it_fits_or_only_one_is_given() -> None:
    assert len(alert_lines(SHORT, NOW, "", 86, MAX_LINES)) == 1
    assert len(alert_lines(LONG, NOW, "", 86, 1)) == 1
    # the last line it may take is cut at the panel's edge (the terminal adds the ellipsis)
    two = alert_lines(LONG, NOW, "", 50, 2)
    assert len(two) == 2 and two[1].cell_len > 50


def test_spare_lines_go_to_the_alerts_that_need_them_only_while_all_fit() -> None:
    assert fit_lines([SHORT, LONG], NOW, 86, 9) == [1, 3]
    assert fit_lines([LONG, SHORT], NOW, 50, 9) == [3, 1]  # MAX_LINES at most
    assert fit_lines([LONG, LONG, SHORT], NOW, 86, 4) == [2, 1, 1]  # one line to spare
    assert fit_lines([LONG, LONG], NOW, 86, 2) == [1, 1]  # none to spare
