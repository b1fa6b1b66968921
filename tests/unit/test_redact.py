"""``gpucon.redact``: credentials masked wherever they sit in a text; the rest left alone."""

from __future__ import annotations

import json

import pytest

from gpucon.model.fleet import Health, SourceStatus
from gpucon.model.reading import Reading
from gpucon.redact import redact, redact_tree, register_secret
from gpucon.sources.base import describe_error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://ops:S3cret@host:6379/0", "redis://ops:***@host:6379/0"),
        ("rediss://:S3cret@host/0", "rediss://:***@host/0"),
        ("https://admin:p@ss@127.0.0.1:9/", "https://admin:***@127.0.0.1:9/"),
        ("see http://a:b@h/x and redis://c:d@h2", "see http://a:***@h/x and redis://c:***@h2"),
        ("redis://ops@host/0", "redis://ops@host/0"),  # a user alone is no secret
        ("http://h/api?query=up&token=abc&x=1", "http://h/api?query=up&token=***&x=1"),
        ("http://h/?access_token=abc", "http://h/?access_token=***"),
        ("http://h/?KEY=abc;password=x", "http://h/?KEY=***;password=***"),
        ("Conn(host='ops:pw@10.0.0.1', port=1)", "Conn(host='ops:***@10.0.0.1', port=1)"),
        ("Redis(password='hunter2', db=0)", "Redis(password=***, db=0)"),
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ("{'Authorization': 'Basic YWRtaW46cHc='}", "{'Authorization': 'Basic ***'}"),
        # ordinary fleet text is left as it is
        ("max_tokens=5 12:30@home ann@h1 key=gen:q", "max_tokens=5 12:30@home ann@h1 key=gen:q"),
        ("", ""),
    ],
)  # fmt: skip
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_registered_secret_masked_anywhere() -> None:
    register_secret("Zq9-registered-secret")
    register_secret("ab")  # too short to look for: it would mask ordinary words
    assert redact("AUTH failed for Zq9-registered-secret (about)") == "AUTH failed for *** (about)"


def test_tree_keeps_json_valid() -> None:
    doc = {"error": 'password="x y" and redis://u:p@h', "n": 1, "l": ["token=abc"]}
    out = redact_tree(doc)
    assert json.loads(json.dumps(out)) == {
        "error": "password=*** and redis://u:***@h",
        "n": 1,
        "l": ["token=***"],
    }


def test_kept_errors_are_masked_whoever_built_them() -> None:
    assert describe_error(ConnectionError("to redis://u:pw@h:1")) == (
        "ConnectionError: to redis://u:***@h:1"
    )
    assert Reading("redis", Health.DOWN, 0.0, error="x http://u:pw@h").error == "x http://u:***@h"
    assert SourceStatus("redis", Health.DOWN, error="redis://u:pw@h").error == "redis://u:***@h"


def test_action_texts_are_masked_whoever_built_them() -> None:
    from gpucon.actions.plan import Outcome, OutcomeStatus, ProgressEvent, StepResult, StepStatus
    from gpucon.errors import StepFailed

    leak = "ConnectionError: redis://ops:pw1234@h:1/0"
    outcome = Outcome("drain", "b1", OutcomeStatus.ERROR, leak, "d", state_left=leak)
    assert "pw1234" not in outcome.message + outcome.state_left
    assert "pw1234" not in ProgressEvent("s", StepStatus.FAILED, leak).text
    assert "pw1234" not in StepResult("s", False, leak).text
    assert str(StepFailed("s", leak)) == "step 's' failed: ConnectionError: redis://ops:***@h:1/0"


def test_a_readiness_check_s_error_keeps_no_credentials() -> None:
    """A backend's /v2/health/ready error is shown in the detail and the alerts."""
    from gpucon.model.liveness import ReadyCheck

    check = ReadyCheck(
        "b1", False, "refused: http://ops:Hunter2Secret@10.0.0.1:8000/v2/health/ready"
    )
    assert check.error is not None and "Hunter2Secret" not in check.error
    assert "ops:***@10.0.0.1:8000" in check.error
