"""``track_mig_unseen``: a node pending at the console's first look (or new to it) is pending
for at least as long as shown; one seen to become pending is dated exactly, and the node
panel's words say which (``pending ≥5m`` against ``pending 5m``)."""

from __future__ import annotations

from gpucon.model.alerts import track_mig_unseen
from gpucon.model.fleet import NodeInfo
from gpucon.widgets.health_text import node_state


def nodes(**states: str) -> dict[str, NodeInfo]:
    return {n: NodeInfo(name=n, mig_config_state=s) for n, s in states.items()}


def test_pending_at_first_look_or_new_is_unseen_until_it_ends() -> None:
    first = track_mig_unseen(frozenset(), None, nodes(a="pending", b="success"))
    assert first == {"a"}
    later = track_mig_unseen(
        first, nodes(a="pending", b="success"), nodes(a="pending", b="pending", c="pending")
    )
    assert later == {"a", "c"}  # b was seen to begin; c is new to this console
    done = track_mig_unseen(
        later,
        nodes(a="pending", b="pending", c="pending"),
        nodes(a="success", b="pending", c="pending"),
    )
    assert done == {"c"}
    again = track_mig_unseen(done, nodes(a="success"), nodes(a="pending"))
    assert again == frozenset()  # pending again, seen


def test_node_state_words() -> None:
    node = NodeInfo(name="a", mig_config_state="pending")
    assert node_state(node, 1000.0, 1300.0) == "pending 5m"
    assert node_state(node, 1000.0, 1300.0, unseen=True) == "pending ≥5m"
    assert node_state(node, 1000.0, 1001.0, unseen=True) == "pending"  # nothing known yet
