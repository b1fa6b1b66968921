"""How a backend's liveness reads in the detail screen: the verdict, then what each signal
said, for how long (``for ≥45s``: as long as this console has watched it say so) and how long
ago it was last asked (the http check and ``up`` are as old as their source's last good read;
the registry's ``ready_at`` is the scheduler's own check time)."""

from __future__ import annotations

from rich.text import Text

from gpucon.model.liveness import BackendLiveness, SignalSince
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt
from gpucon.widgets.safe_text import safe


def _age(snapshot: Snapshot, source: str | None) -> str:
    status = snapshot.sources.get(source) if source else None
    age = None if status is None else status.age_s(snapshot.taken_at)
    return "" if age is None else f", {fmt.seconds(age)} ago"


def _for(since: SignalSince | None, snapshot: Snapshot) -> str:
    age = "" if since is None else since.age(snapshot.taken_at)
    return f" {age}" if age else ""


def signal_words(lv: BackendLiveness, snapshot: Snapshot) -> list[tuple[str, bool]]:
    """(what one signal said, whether it is drawn as current) for each signal that said
    anything; a signal too old to count is marked "(old)"."""
    words: list[tuple[str, bool]] = []
    if lv.http_ready is not None:
        said = "ready" if lv.http_ready else (lv.http_error or "not ready")
        said += _for(lv.http_since, snapshot)
        words.append((f"http: {said}{_age(snapshot, lv.http_source)}", lv.http_fresh))
    else:
        words.append(("http: not checked", False))
    if lv.prom_up is not None:
        up = f"prometheus up={1 if lv.prom_up else 0}{_for(lv.prom_since, snapshot)}"
        up += _age(snapshot, lv.prom_source)
        words.append((up, lv.prom_fresh))
    if lv.registry_ready is not None:
        at = lv.registry_ready_at
        said = f"registry ready={1 if lv.registry_ready else 0}{_for(lv.registry_since, snapshot)}"
        if at is None:  # a scheduler that does not say when it checked vouches for nothing
            words.append((f"{said} (no ready_at)", True))
        else:
            age = fmt.seconds(max(0.0, snapshot.taken_at - at))
            words.append((f"{said}, {age} ago", lv.registry_fresh))
    return words


def liveness_text(lv: BackendLiveness | None, snapshot: Snapshot, styles: dict[str, str]) -> Text:
    """``NOT READY  http: refused for 45s, 0.4s ago · prometheus up=0 for 1m, 3.0s ago · …``;
    signals too old to count are dimmed and marked "(old)"."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if lv is None:
        text.append("readiness: n/a (no signal judged)", style="dim")
        return text
    verdict, style = {
        True: ("serving", styles.get("ok", "")),
        False: ("NOT READY", styles.get("breach", "bold")),
        None: ("DISPUTED" if lv.disputed else "nothing vouches", styles.get("warn", "")),
    }[lv.serving]
    text.append(f"{verdict:<15}", style=style)
    for i, (words, counts) in enumerate(signal_words(lv, snapshot)):
        if i:
            text.append(" · ", style="dim")
        text.append_text(safe(words + ("" if counts else " (old)"), 60, "" if counts else "dim"))
    return text
