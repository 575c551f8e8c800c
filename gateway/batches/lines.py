"""A batch's lines, read and checked before anything else happens to them. Pure.

OpenAI's input file is JSONL, one request a line: `{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body": {...}}`. Anthropic's Message Batches come inline:
`{"requests": [{"custom_id", "params": {...}}]}`. Either way each line names its model,
and an error names the line (1-based, as an editor shows it) and its custom id.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from gateway.domain.openai_errors import OpenAIError

# the URLs a line of OpenAI's batch may name that the gateway can price and route
OPENAI_URLS = ("/v1/chat/completions",)
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # Anthropic's rule; OpenAI's is looser


@dataclasses.dataclass(frozen=True, slots=True)
class BatchLine:
    number: int  # 1-based
    custom_id: str
    model: str  # as the app named it: a model or an alias
    body: dict[str, Any]  # the request body (OpenAI) or `params` (Anthropic)

    @property
    def max_tokens(self) -> int | None:
        value = self.body.get("max_completion_tokens", self.body.get("max_tokens"))
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def line_error(number: int, message: str, custom_id: str | None = None) -> OpenAIError:
    who = f"line {number}" + (f" (custom_id {custom_id[:64]!r})" if custom_id else "")
    return OpenAIError(400, f"{who}: {message}", param=f"line {number}",
                       code="invalid_batch_line")  # fmt: skip


def _body(number: int, custom_id: str, body: Any, what: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(body, dict):
        raise line_error(number, f"`{what}` must be an object", custom_id)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise line_error(number, f"`{what}.model` is required", custom_id)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise line_error(number, f"`{what}.messages` must be a non-empty list", custom_id)
    if body.get("stream"):
        raise line_error(number, "a batch line cannot stream", custom_id)
    return model, body


def _custom_id(number: int, value: Any, seen: set[str], strict: bool) -> str:
    if not isinstance(value, str) or not value or (strict and not _CUSTOM_ID.match(value)):
        raise line_error(number, "`custom_id` must be a non-empty string"
                         + (" of 1-64 letters, digits, _ or -" if strict else ""))  # fmt: skip
    if len(value) > 512:
        raise line_error(number, "`custom_id` is longer than 512 characters")
    if value in seen:
        raise line_error(number, "`custom_id` is used by an earlier line", value)
    seen.add(value)
    return value


def parse_openai_lines(data: bytes, endpoint: str, max_lines: int) -> list[BatchLine]:
    """The lines of an OpenAI batch input file, each for `endpoint`."""
    if endpoint not in OPENAI_URLS:
        raise OpenAIError(400, f"endpoint {endpoint[:80]!r} is not served in batches here; "
                          f"use one of {', '.join(OPENAI_URLS)}", param="endpoint")  # fmt: skip
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise OpenAIError(400, "The input file is not UTF-8 text.",
                          param="input_file_id") from None  # fmt: skip
    out: list[BatchLine] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(out) >= max_lines:
            raise line_error(number, f"a batch holds at most {max_lines} lines")
        try:
            item = json.loads(raw)
        except ValueError:
            raise line_error(number, "not a JSON object") from None
        if not isinstance(item, dict):
            raise line_error(number, "not a JSON object")
        custom_id = _custom_id(number, item.get("custom_id"), seen, strict=False)
        if item.get("method", "POST") != "POST":
            raise line_error(number, "`method` must be POST", custom_id)
        if item.get("url") != endpoint:
            raise line_error(number, f"`url` must be the batch's endpoint {endpoint}", custom_id)
        model, body = _body(number, custom_id, item.get("body"), "body")
        out.append(BatchLine(number, custom_id, model, body))
    if not out:
        raise OpenAIError(400, "The input file holds no request.", param="input_file_id")
    return out


def parse_anthropic_requests(payload: Any, max_lines: int) -> list[BatchLine]:
    """The requests of a `POST /v1/messages/batches` body."""
    requests = payload.get("requests") if isinstance(payload, dict) else None
    if not isinstance(requests, list) or not requests:
        raise OpenAIError(400, "requests: a non-empty list is required", param="requests")
    if len(requests) > max_lines:
        raise OpenAIError(400, f"requests: at most {max_lines} per batch", param="requests")
    out: list[BatchLine] = []
    seen: set[str] = set()
    for number, item in enumerate(requests, start=1):
        if not isinstance(item, dict):
            raise line_error(number, "each request must be an object")
        custom_id = _custom_id(number, item.get("custom_id"), seen, strict=True)
        model, params = _body(number, custom_id, item.get("params"), "params")
        if not isinstance(params.get("max_tokens"), int):
            raise line_error(number, "`params.max_tokens` is required", custom_id)
        out.append(BatchLine(number, custom_id, model, params))
    return out


def upstream_jsonl(lines: list[BatchLine], models: dict[str, str], endpoint: str) -> bytes:
    """The input file the provider gets: each line's model as that provider names it."""
    rows = [
        json.dumps({"custom_id": line.custom_id, "method": "POST", "url": endpoint,
                    "body": {**line.body, "model": models[line.custom_id]}})  # fmt: skip
        for line in lines
    ]
    return ("\n".join(rows) + "\n").encode("utf-8")
