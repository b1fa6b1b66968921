"""``[[fleets.NAME.mps]]``: daemons and their servers parsed and refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from gpucon.config import ConfigError
from gpucon.config.schema import parse_document


def doc(**daemon: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"target": "vm-a"}
    base.update(daemon)
    return {"fleets": {"f": {"redis": {}, "mps": [base]}}}


def test_a_daemon_with_servers_at_60_40() -> None:
    servers = [
        {"backend": "a", "thread_pct": 60, "start": ["s", "a"], "pinned_mem_limit": "0=20G"},
        {"backend": "b", "thread_pct": 40},
    ]
    (daemon,) = parse_document(doc(servers=servers, default_thread_pct=100), None).fleet.mps
    assert daemon.transport == "local" and daemon.default_thread_pct == 100.0
    assert [(s.backend, s.thread_pct) for s in daemon.servers] == [("a", 60.0), ("b", 40.0)]
    assert daemon.servers[0].start == ("s", "a")


@pytest.mark.parametrize(
    ("daemon", "named"),
    [
        ({"transport": "telnet"}, "fleets.f.mps[0].transport"),
        ({"transport": "ssh", "ssh_host": "h"}, "fleets.f.mps[0].ssh_host"),
        ({"transport": "kube"}, "fleets.f.mps[0].node"),
        ({"default_thread_pct": 150}, "fleets.f.mps[0].default_thread_pct"),
        ({"servers": [{"backend": "a", "thread_pct": -1}]}, "servers[0].thread_pct"),
        ({"servers": [{"thread_pct": 50}]}, "servers[0].backend"),
        ({"colour": "red"}, "fleets.f.mps[0].colour"),
    ],
)
def test_refusals_name_the_key(daemon: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        parse_document(doc(**daemon), None)


def test_two_daemons_for_one_target_are_refused() -> None:
    document = {"fleets": {"f": {"mps": [{"target": "x"}, {"target": "x"}]}}}
    with pytest.raises(ConfigError, match=r"mps\[1\]\.target"):
        parse_document(document, None)
