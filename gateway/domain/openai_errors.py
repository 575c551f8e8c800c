"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.

The official SDKs map the HTTP status to an exception class (400 BadRequestError, 401
AuthenticationError, 404 NotFoundError, 413, 429 RateLimitError, 5xx InternalServerError),
so the status matters as much as the body. Messages never carry secrets: they are built
from our own words and from validated, bounded values only.
"""

from __future__ import annotations

import json
from typing import Any

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "timeout_error",
}


class OpenAIError(Exception):
    """An error that reaches the client as an OpenAI-shaped body with `status`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type_: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type_ or _TYPES.get(status, "api_error")
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def body_bytes(self) -> bytes:
        return json.dumps(self.body()).encode()


def bad_request(
    message: str, *, param: str | None = None, code: str = "invalid_request"
) -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)
