"""The liveness verdict: which signals vouch for a backend, which object, and the alerts."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from gpucon.model.alerts import AlertInputs, AlertThresholds, Severity, derive_alerts
from gpucon.model.fleet import Backend, BackendState, LatencyStats
from gpucon.model.history import History
from gpucon.model.liveness import (
    BackendLiveness,
    ReadyCheck,
    TargetUp,
    judge,
    withhold_dead_targets,
)
from gpucon.model.liveness_book import LivenessBook, Signals, match_targets
from gpucon.registry.parse import parse_backend
from gpucon.sources.problems import Problems
from gpucon.sources.prom_up import parse_up
from tests.helpers.liveness_policy import POLICY as P

NOW = 1000.0
B = Backend("b1", url="http://10.0.0.1:8000")


def http(
    ready: bool, error: str | None = None, at: float = NOW - 0.5
) -> tuple[ReadyCheck, str, float]:
    return (ReadyCheck("b1", ready, error), "readiness", at)


def up(
    value: bool, at: float = NOW - 1.0, instance: str = "10.0.0.1:8000"
) -> tuple[TargetUp, str, float]:
    return (TargetUp(instance, value, "triton"), "prometheus", at)


def registry(ready: bool, age_s: float) -> Backend:
    return Backend("b1", url=B.url, ready=ready, ready_at=NOW - age_s)


def test_the_backends_own_ready_vouches() -> None:
    lv = judge(B, http(True), None, NOW, P)
    assert (lv.serving, lv.because) == (True, "http ready")


def test_killed_backend_every_signal_against() -> None:
    lv = judge(registry(False, 0.4), http(False, "refused"), up(False), NOW, P)
    assert lv.serving is False
    assert lv.because == "http refused, registry ready=0, prometheus up=0"


def test_up_alone_does_not_rescue_a_backend_that_says_not_ready() -> None:
    # the server answers its metrics endpoint (up=1) but /v2/health/ready says 503
    lv = judge(registry(False, 0.4), http(False, "status 503"), up(True), NOW, P)
    assert (lv.serving, lv.because) == (False, "http status 503, registry ready=0")


def test_when_readiness_signals_disagree_the_newer_one_wins_for_a_while() -> None:
    # killed: the console's check (0.2 s ago) saw it before the scheduler's (0.6 s ago) did
    killed = judge(registry(True, 0.6), http(False, "refused", at=NOW - 0.2), None, NOW, P)
    assert (killed.serving, killed.disputed) == (False, True)
    assert killed.because == "http refused, registry ready=1"
    # restarted: the other way round
    back = judge(registry(False, 0.7), http(True, at=NOW - 0.2), None, NOW, P)
    assert (back.serving, back.disputed) == (True, True)
    # a disagreement that lasts is reported as one: nothing decides
    lasting = judge(registry(True, 0.1), http(False, "timeout"), up(True), NOW, P, 6.0)
    assert lasting.serving is None and lasting.disputed
    assert lasting.because == "http timeout, registry ready=1, prometheus up=1"


def test_the_book_reports_a_lasting_dispute() -> None:
    book = LivenessBook(P)
    verdicts = []
    for t in range(8):  # the console cannot reach it, the scheduler can: both keep checking
        now = NOW + t
        b = Backend("b1", url=B.url, ready=True, ready_at=now - 0.1)
        check = {"b1": ReadyCheck("b1", False, "timeout")}
        signals = Signals(checks=(("readiness", now - 0.3, check),))
        verdicts.append(book.judge_all({"b1": b}, signals, now)["b1"].serving)
    assert verdicts == [True] * 5 + [None] * 3


def test_up_decides_only_without_a_readiness_signal() -> None:
    assert judge(B, None, up(True), NOW, P).serving is True
    down = judge(B, None, up(False), NOW, P)
    assert (down.serving, down.because) == (False, "prometheus up=0 (no readiness signal)")
    # beside a backend that says ready, up=0 is said but does not decide
    lv = judge(B, http(True), up(False), NOW, P)
    assert (lv.serving, lv.because) == (True, "http ready, prometheus up=0")


@pytest.mark.parametrize(
    ("backend", "check", "target", "words"),
    [
        (B, http(True, at=NOW - 10), None, "no fresh signal (http check too old)"),
        (registry(True, 60.0), None, None, "no fresh signal (registry ready_at too old)"),
        (B, None, up(True, at=NOW - 60), "no fresh signal (prometheus up too old)"),
        (B, None, None, "no readiness signal"),
        (Backend("b1"), None, None, "no readiness signal (no url to check)"),
    ],
)
def test_old_or_missing_signals_vouch_for_nothing(
    backend: Backend,
    check: tuple[ReadyCheck, str, float] | None,
    target: tuple[TargetUp, str, float] | None,
    words: str,
) -> None:
    lv = judge(backend, check, target, NOW, P)
    assert (lv.serving, lv.disputed, lv.because) == (None, False, words)


def test_registry_ready_without_its_time_does_not_vouch() -> None:
    lv = judge(Backend("b1", url=B.url, ready=True), None, None, NOW, P)
    assert lv.serving is None and lv.registry_ready is True and not lv.registry_fresh


def test_targets_match_by_address_or_by_the_only_target_on_the_host() -> None:
    backends = {
        "same-port": Backend("same-port", url="http://10.0.0.1:8000"),
        "triton-a": Backend("triton-a", url="http://10.0.0.2:8000"),  # metrics on :8002
        "triton-b": Backend("triton-b", url="http://10.0.0.2:8000/"),  # same server, 2nd model
        "ambiguous": Backend("ambiguous", url="http://10.0.0.3:8000"),
        "garbage": Backend("garbage", url="http://[::1"),
    }
    ups = {
        i: (TargetUp(i, True), "prometheus", NOW)
        for i in ("10.0.0.1:8000", "10.0.0.2:8002", "10.0.0.3:9100", "10.0.0.3:8002")
    }
    matched = {name: hit[0].instance for name, hit in match_targets(backends, ups).items()}
    assert matched == {
        "same-port": "10.0.0.1:8000",
        "triton-a": "10.0.0.2:8002",
        "triton-b": "10.0.0.2:8002",
    }


def test_the_book_keeps_an_unchanged_verdict_and_notices_time_passing() -> None:
    book = LivenessBook(P)
    backends = {"b1": B}
    check = ReadyCheck("b1", True)
    signals = Signals(checks=(("readiness", NOW, {"b1": check}),))
    first = book.judge_all(backends, signals, NOW)
    again = book.judge_all(backends, signals, NOW + 1)
    assert again["b1"] is first["b1"] and first["b1"].serving is True
    # no new check for longer than the http limit: the old one no longer vouches
    later = book.judge_all(backends, signals, NOW + 5)
    assert later["b1"].serving is None


def test_the_book_hands_on_the_same_mapping_while_every_verdict_is_kept() -> None:
    """Snapshot readers skip an unchanged section by identity: the book's mapping is last
    call's object while every verdict is kept for the same backends in the same order, and
    a new one as soon as one verdict, a name or the order changes."""
    book = LivenessBook(P)
    b2 = Backend("b2", url="http://10.0.0.2:8000")
    checks = {"b1": ReadyCheck("b1", True), "b2": ReadyCheck("b2", True)}
    signals = Signals(checks=(("readiness", NOW, checks),))
    first = book.judge_all({"b1": B, "b2": b2}, signals, NOW)
    # new backend objects with the fields a verdict reads unchanged (a live read): kept
    again = book.judge_all(
        {"b1": msgspec.structs.replace(B, inflight=3), "b2": b2}, signals, NOW + 1
    )
    assert again is first
    # one backend's check changed: a new mapping, the other verdict the same object
    down = {**checks, "b2": ReadyCheck("b2", False, "503")}
    changed = book.judge_all({"b1": B, "b2": b2}, Signals(checks=(("readiness", NOW, down),)), NOW)
    assert changed is not first and changed["b1"] is first["b1"]
    assert changed["b2"].serving is False and first["b2"].serving is True
    # the same verdicts in another order, or for fewer backends: new mappings
    signals = Signals(checks=(("readiness", NOW, down),))
    assert list(book.judge_all({"b2": b2, "b1": B}, signals, NOW)) == ["b2", "b1"]
    alone = book.judge_all({"b1": B}, signals, NOW)
    assert list(alone) == ["b1"] and book.judge_all({"b1": B}, signals, NOW) is alone


def test_the_book_judges_each_backend_as_judge_does_with_one_or_two_check_sources() -> None:
    """Many backends, some checked by one source, some by the other or neither, some with
    ``up``: the book's verdicts are ``judge``'s on each backend's first check and its up."""
    names = [f"b{i}" for i in range(12)]
    backends = {
        n: Backend(n, url=f"http://10.0.0.{i}:8000", ready=i % 3 != 0, ready_at=NOW - i)
        for i, n in enumerate(names)
    }
    first = {
        n: ReadyCheck(n, i % 2 == 0, None if i % 2 == 0 else "refused")
        for i, n in enumerate(names)
        if i % 4 != 3
    }
    second = {n: ReadyCheck(n, True) for n in names}
    ups = tuple(TargetUp(f"10.0.0.{i}:8000", i % 5 != 0) for i in range(0, 12, 2))
    for checks in (
        (("readiness", NOW - 1.0, first),),
        (("readiness", NOW - 1.0, first), ("other", NOW - 4.0, second)),
        (),
    ):
        for with_up in (False, True):
            signals = Signals(
                checks=checks,
                ups=(("prometheus", NOW - 2.0, {u.instance: u for u in ups}),) if with_up else (),
            )
            book = LivenessBook(P)
            for now in (NOW, NOW + 1.0, NOW + 3.0):  # kept verdicts, and time passing
                verdicts = book.judge_all(backends, signals, now)
                for n, b in backends.items():
                    check = next(((by[n], src, at) for src, at, by in checks if n in by), None)
                    u = next(
                        (
                            (x, "prometheus", NOW - 2.0)
                            for x in ups
                            if with_up and x.instance == (b.url or "").split("//")[1]
                        ),
                        None,
                    )
                    assert verdicts[n] == judge(b, check, u, now, P), (checks, with_up, n)


def test_rates_of_a_dead_scrape_target_are_withheld() -> None:
    lat = {
        "dead": LatencyStats("dead", req_per_s=2.1, p95_ms=40.0, pending=1.0),
        "alive": LatencyStats("alive", req_per_s=5.0, p95_ms=30.0),
    }
    liveness = {
        "dead": BackendLiveness("dead", prom_up=False, prom_fresh=True, serving=False),
        "alive": BackendLiveness("alive", prom_up=True, prom_fresh=True, serving=True),
    }
    out = withhold_dead_targets(lat, liveness)
    assert out["dead"] == LatencyStats("dead")  # every measurement n/a, the key kept
    assert out["alive"] is lat["alive"]
    old_up = {"dead": BackendLiveness("dead", prom_up=False, prom_fresh=False)}
    assert withhold_dead_targets(lat, old_up)["dead"] is lat["dead"]


# -- alerts ------------------------------------------------------------------------------------


def alerts_for(
    backends: dict[str, Backend],
    liveness: dict[str, BackendLiveness],
    latency: dict[str, LatencyStats] | None = None,
) -> dict[tuple[str, str], tuple[Severity, str]]:
    inputs = AlertInputs(
        now=NOW,
        slots={},
        backends=backends,
        latency=latency or {},
        queues={},
        sources={},
        history=History(),
        liveness=liveness,
    )
    return {
        (a.rule, a.target): (a.severity, a.message)
        for a in derive_alerts(inputs, AlertThresholds())
    }


def test_a_dead_backend_raises_a_critical_alert_naming_what_said_so() -> None:
    dead = judge(Backend("lab-b1", url=B.url), http(False, "refused"), up(False), NOW, P)
    alerts = alerts_for({"lab-b1": Backend("lab-b1", url=B.url)}, {"lab-b1": dead})
    assert alerts[("not_ready", "lab-b1")] == (
        Severity.CRITICAL,
        "not ready: http refused, prometheus up=0",
    )


def test_not_ready_by_state() -> None:
    not_serving = BackendLiveness("x", serving=False, because="http refused")
    disputed = BackendLiveness("x", serving=None, disputed=True, because="http timeout, …")
    settling = BackendLiveness("x", serving=True, disputed=True, because="http ready, …")
    silent = BackendLiveness("x", serving=None, because="no readiness signal")
    cases = {
        (BackendState.ACTIVE, not_serving): Severity.CRITICAL,
        (BackendState.DRAINING, not_serving): Severity.CRITICAL,  # dies mid-drain: requests lost
        # taken out on purpose: a reminder, not an alarm, that it is dead (fix before undrain)
        (BackendState.DRAINED, not_serving): Severity.INFO,
        (BackendState.DRAINED, silent): None,
        (BackendState.ACTIVE, disputed): Severity.WARNING,
        (BackendState.ACTIVE, settling): None,  # a restart the scheduler has not seen yet
        (BackendState.ACTIVE, silent): Severity.INFO,
        (BackendState.DRAINING, silent): None,
    }
    for (state, lv), expected in cases.items():
        found = alerts_for({"x": Backend("x", state=state)}, {"x": lv}).get(("not_ready", "x"))
        assert (found[0] if found else None) == expected, (state, lv)


def test_p95_is_judged_only_on_a_backend_that_takes_work() -> None:
    slow = LatencyStats("x", req_per_s=3.0, p95_ms=9000.0)
    serving = {"x": BackendLiveness("x", serving=True)}
    assert ("p95_slo", "x") in alerts_for({"x": Backend("x")}, serving, {"x": slow})
    for state in (BackendState.DRAINING, BackendState.DRAINED, BackendState.DOWN):
        rules = alerts_for({"x": Backend("x", state=state)}, serving, {"x": slow})
        assert not {r for r, _ in rules} & {"p95_slo", "no_traffic"}, state
    dead = {"x": BackendLiveness("x", serving=False, because="http refused")}
    assert ("p95_slo", "x") not in alerts_for({"x": Backend("x")}, dead, {"x": slow})


def test_no_traffic_instead_of_a_p95_alert() -> None:
    idle = LatencyStats("x", req_per_s=0.0, p95_ms=9000.0)
    alerts = alerts_for({"x": Backend("x")}, {"x": BackendLiveness("x", serving=True)}, {"x": idle})
    assert ("p95_slo", "x") not in alerts
    severity, message = alerts[("no_traffic", "x")]
    assert severity is Severity.INFO and message.startswith("no traffic")


# -- parsing the signals -----------------------------------------------------------------------


def test_parse_up_one_target_per_instance_garbage_noted() -> None:
    problems = Problems()
    series: list[dict[str, Any]] = [
        {"metric": {"instance": "h:1", "job": "triton"}, "value": [0, "0"]},
        {"metric": {"instance": "h:1", "job": "other"}, "value": [0, "1"]},  # up in any job
        {"metric": {"instance": "h:2"}, "value": [0, "0"]},
        {"metric": {"job": "x"}, "value": [0, "1"]},
        {"metric": {"instance": "h:3"}, "value": [0, "NaN"]},
        {"metric": "nope", "value": [0, "1"]},
    ]
    ups = parse_up(series, problems)
    assert [(u.instance, u.up) for u in ups] == [("h:1", True), ("h:2", False)]
    assert problems.count == 3


def test_registry_ready_at_is_parsed_and_garbage_noted() -> None:
    b, problems = parse_backend("b", {"state": "active", "ready": "1", "ready_at": "1700000000.25"})
    assert (b.ready, b.ready_at) == (True, 1700000000.25) and problems == ()
    bad, problems = parse_backend("b", {"state": "active", "ready_at": "yesterday"})
    assert bad.ready_at is None
    assert any("ready_at" in p for p in problems)


def test_many_backends_nothing_vouches_for_make_one_alert_not_a_flood() -> None:
    """A readiness source gone quiet leaves every backend unvouched: one alert says so,
    instead of one each pushing the real causes off the alerts panel."""
    from gpucon.model.alerts import (
        UNVOUCHED_ONE_BY_ONE,
        AlertInputs,
        AlertThresholds,
        derive_alerts,
    )
    from gpucon.model.history import History
    from gpucon.model.liveness import BackendLiveness

    def inputs(count: int) -> AlertInputs:
        names = [f"b{n}" for n in range(count)]
        return AlertInputs(
            NOW,
            {},
            {n: Backend(n) for n in names},
            {},
            {},
            {},
            History(),
            liveness={
                n: BackendLiveness(n, serving=None, because="http check too old") for n in names
            },
        )

    few = [
        a
        for a in derive_alerts(inputs(UNVOUCHED_ONE_BY_ONE), AlertThresholds())
        if a.rule == "not_ready"
    ]
    assert sorted(a.target for a in few) == ["b0", "b1", "b2"]
    many = [a for a in derive_alerts(inputs(11), AlertThresholds()) if a.rule == "not_ready"]
    assert [a.target for a in many] == ["backends"]
    assert "nothing vouches for 11 backends (b0, b1, b10, …)" in many[0].message


def test_the_books_column_shortcut_judges_as_a_walk_of_every_backend() -> None:
    """Tick after tick, each backend a new object (as a live source reads it), with now and
    then one of what a verdict reads changed (ready, ready_at, url, a check, the time making
    a ready_at stale, a check group's freshness) or a dispute: the book's verdicts are those
    of a book that walks every backend each call."""
    import random

    rng = random.Random(5)
    names = [f"b{i}" for i in range(40)]
    # each backend's (ready, ready_at, url)
    fields: dict[str, tuple[bool | None, float | None, str | None]] = {
        n: (True, NOW - 1.0, f"http://10.0.0.{i}:8000") for i, n in enumerate(names)
    }
    checks = {n: ReadyCheck(n, True) for n in names}
    quick, walk = LivenessBook(P), LivenessBook(P)
    walk_read = walk.judge_all

    def walked(backends: dict[str, Backend], signals: Signals, now: float) -> object:
        walk._read = None  # never the shortcut
        return walk_read(backends, signals, now)

    check_at = NOW
    kept = 0
    for tick in range(300):
        now = NOW + tick
        change = rng.randrange(9)
        n = rng.choice(names)
        ready, at, url = fields[n]
        if change == 0:
            fields[n] = (not ready, at, url)
        elif change == 1:
            fields[n] = (ready, now - rng.choice((0.0, 1.0, 60.0)), url)  # fresh, or stale
        elif change == 2:
            fields[n] = (ready, at, f"http://10.9.0.{tick % 200}:8000")
        elif change == 3:
            checks = {**checks, n: ReadyCheck(n, rng.random() < 0.5, "503")}
        elif change == 4:
            check_at = now - rng.choice((0.0, 10.0))  # the group fresh, or too old
        elif change == 5:
            fields[n] = (ready, None, url)
        backends = {
            m: Backend(m, url=f[2], ready=f[0], ready_at=f[1], inflight=tick)
            for m, f in fields.items()
        }
        signals = Signals(checks=(("readiness", check_at, checks),))
        before = quick._last
        got = quick.judge_all(backends, signals, now)
        kept += got is before
        assert got == walked(backends, signals, now), tick
    assert kept > 100  # the last verdicts handed on most ticks, and checked each time
    # a dispute (the registry fresh and ready, the check refused) that lasts past
    # ``dispute_after_s`` with nothing else changing: the verdict moves with time alone
    start = NOW + 400
    fields["b0"] = (True, start, fields["b0"][2])
    checks = {**checks, "b0": ReadyCheck("b0", False, "503")}
    seen = set()
    for tick in range(6):  # the readiness source checks again each tick: the same answers
        signals = Signals(checks=(("readiness", start + tick, checks),))
        backends = {
            m: Backend(m, url=f[2], ready=f[0], ready_at=f[1], inflight=tick)
            for m, f in fields.items()
        }
        got = quick.judge_all(backends, signals, start + tick)
        assert got == walked(backends, signals, start + tick), tick
        seen.add(got["b0"].serving)
    assert got["b0"].disputed and seen == {False, None}
