"""``one_left``: a model with two or more backends served by exactly one is named (WARN), with
why the others are out; one backend by design, or none serving, is not this rule's."""

from __future__ import annotations

from gpucon.model.alerts import AlertThresholds, derive_alerts
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.history import History
from gpucon.model.liveness import BackendLiveness
from tests.unit.test_model_early_warning import inputs

NOW = 1000.0


def _one_left(backends: dict[str, Backend], **liveness: BackendLiveness) -> list[tuple[str, str]]:
    parts = inputs(NOW, History(capacity=8), backends=backends, liveness=liveness)
    return [
        (a.target, a.message)
        for a in derive_alerts(parts, AlertThresholds())
        if a.rule == "one_left"
    ]


def _b(name: str, model: str, **kw: object) -> Backend:
    return Backend(name, model=model, **kw)  # type: ignore[arg-type]


def test_the_last_serving_backend_of_a_model_is_named_with_why_the_others_are_out() -> None:
    fleet = {
        "lab-b0": _b("lab-b0", "bert", state=BackendState.DRAINING),
        "lab-b1": _b("lab-b1", "bert"),
        "lab-b2": _b("lab-b2", "bert"),
        "sd-0": _b("sd-0", "sd"),
        "sd-1": _b("sd-1", "sd"),
    }
    dead = BackendLiveness("lab-b1", serving=False, because="http refused")
    found = _one_left(fleet, **{"lab-b1": dead})
    assert found == [
        (
            "bert",
            "only lab-b2 serves bert (lab-b0 draining, lab-b1 not ready): one more failure or "
            "drain leaves it nothing",
        )
    ]
    # the registry's ready=0 counts where nothing else judged it
    assert _one_left({**fleet, "lab-b1": _b("lab-b1", "bert", ready=False)})[0][0] == "bert"


def test_one_backend_by_design_none_serving_or_unvouched_are_not_named() -> None:
    assert _one_left({"solo": _b("solo", "whisper")}) == []
    none = {
        "a": _b("a", "m", state=BackendState.DRAINED),
        "b": _b("b", "m", state=BackendState.DOWN),
    }
    assert _one_left(none) == []
    # a backend nothing vouches for counts as serving: no alarm from missing evidence
    two = {"a": _b("a", "m"), "b": _b("b", "m")}
    assert _one_left(two, a=BackendLiveness("a", serving=None, because="no check yet")) == []


def test_many_out_are_counted_past_the_first_three() -> None:
    fleet = {f"b{i}": _b(f"b{i}", "m", state=BackendState.DRAINED) for i in range(5)}
    fleet["live"] = _b("live", "m")
    ((target, message),) = _one_left(fleet)
    assert target == "m" and "b0 drained, b1 drained, b2 drained, 2 more" in message
