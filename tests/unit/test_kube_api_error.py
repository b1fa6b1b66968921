"""describe_api_error: the API's Status, with the causes that name what refused (a budget)."""

from __future__ import annotations

import json

from gpucon.sources.kube_objects import describe_api_error


class ApiError(Exception):
    def __init__(self, status: int, reason: str, body: str | None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.body = status, reason, body


def test_an_eviction_refusal_names_the_budget_from_its_causes() -> None:
    body = {
        "kind": "Status",
        "code": 429,
        "reason": "TooManyRequests",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget llm needs 2 healthy pods and has 2 currently",
                }
            ]
        },
    }
    assert describe_api_error(ApiError(429, "Too Many Requests", json.dumps(body))) == (
        "HTTP 429 TooManyRequests: Cannot evict pod as it would violate the pod's disruption "
        "budget. (The disruption budget llm needs 2 healthy pods and has 2 currently)"
    )


def test_a_status_without_causes_or_with_odd_ones_is_its_message() -> None:
    plain = {"reason": "NotFound", "message": 'pods "x" not found'}
    assert describe_api_error(ApiError(404, "Not Found", json.dumps(plain))) == (
        'HTTP 404 NotFound: pods "x" not found'
    )
    odd = {**plain, "details": {"causes": ["text", {"reason": "x"}]}}
    assert describe_api_error(ApiError(404, "Not Found", json.dumps(odd))) == (
        'HTTP 404 NotFound: pods "x" not found'
    )
    assert (
        describe_api_error(ApiError(502, "Bad Gateway", "<html>")) == "HTTP 502 Bad Gateway: <html>"
    )
