"""Anthropic's error shapes for the request path's errors, by status and passed-on type."""

from __future__ import annotations

import json

import pytest

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.messages.errors import error_body, error_response, stream_error_event


@pytest.mark.parametrize(("status", "kind"), [
    (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
    (404, "not_found_error"), (413, "request_too_large"), (429, "rate_limit_error"),
    (502, "api_error"), (503, "overloaded_error"), (504, "timeout_error"),
])
def test_statuses_map_to_anthropics_types(status, kind):
    assert error_body(OpenAIError(status, "m")) == {"type": "error",
                                                    "error": {"type": kind, "message": "m"}}


def test_an_upstream_anthropic_type_is_kept():
    err = OpenAIError(529, "Overloaded", type_="overloaded_error")
    assert error_body(err)["error"]["type"] == "overloaded_error"
    # an OpenAI type that Anthropic lacks is not passed on
    assert error_body(OpenAIError(502, "x", type_="upstream_error"))["error"]["type"] == \
        "api_error"


def test_the_response_carries_status_headers_and_body():
    resp = error_response(OpenAIError(429, "slow down", headers={"retry-after": "3"}),
                          {"x-costgate-request-id": "r"})
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "3" and resp.headers["x-costgate-request-id"] == "r"
    assert json.loads(resp.body)["error"]["type"] == "rate_limit_error"
    assert stream_error_event("x") == {"type": "error",
                                       "error": {"type": "api_error", "message": "x"}}
