"""OpenAI's chat completions wire format: OpenAI itself and every compatible relay.

The request path already speaks this shape, so the adapter translates nothing: it adds
the Bearer key and the `/chat/completions` path, checks that answers are completions,
reads usage (with cached and reasoning tokens from their details) and the text of each
chunk, for estimates when a stream ends without usage.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.domain.config import Provider
from gateway.domain.pricing import TokenUsage
from gateway.providers.adapter import ChatReply, MalformedReply, StreamParser, WireRequest
from gateway.providers.sse import DONE

_JSON_SEPARATORS = (",", ":")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_from_openai(usage: Any) -> TokenUsage | None:
    """OpenAI's usage object, with cached and reasoning tokens from their details."""
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    cached = _int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0
    reasoning = (
        _int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else 0
    )
    # the parts are included in the totals; an upstream that says otherwise is clamped
    # rather than trusted with a larger bill
    return TokenUsage(
        prompt_tokens=prompt,
        cached_prompt_tokens=min(cached, prompt),
        completion_tokens=completion,
        reasoning_tokens=min(reasoning, completion),
    )


def completion_text(body: dict[str, Any]) -> str:
    """The generated text of a non-streaming completion (every choice), for estimates."""
    parts: list[str] = []
    for choice in body.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("content"), str):
            parts.append(message["content"])
        parts.extend(_tool_arguments(message.get("tool_calls")))
    return "".join(parts)


def _tool_arguments(calls: Any) -> list[str]:
    out: list[str] = []
    for call in calls or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            out.append(fn["arguments"])
    return out


class OpenAIStreamParser:
    """OpenAI chunks pass through as they are; the parser notes text, usage and the end."""

    __slots__ = ("_done", "_finished", "_text", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._usage: TokenUsage | None = None
        self._finished = False
        self._done = False

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def done(self) -> bool:
        return self._done

    @property
    def usage(self) -> TokenUsage | None:
        return self._usage

    def text(self) -> str:
        return "".join(self._text)

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        if payload.strip() == DONE:
            self._finished = self._done = True
            return []
        try:
            chunk = json.loads(payload)
        except ValueError as err:
            raise MalformedReply(f"an upstream stream chunk is not JSON: {err}") from None
        if not isinstance(chunk, dict):
            raise MalformedReply("an upstream stream chunk is not a JSON object")
        usage = usage_from_openai(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        choices = chunk.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                if isinstance(delta, dict):
                    content = delta.get("content")
                    if isinstance(content, str):
                        self._text.append(content)
                    self._text.extend(_tool_arguments(delta.get("tool_calls")))
                if choice.get("finish_reason"):
                    self._finished = True
        return [chunk]


class OpenAIAdapter:
    kind = "openai"

    def chat_request(
        self, provider: Provider, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return WireRequest(
            url=provider.base_url.rstrip("/") + "/chat/completions",
            headers=headers,
            content=json.dumps(body, separators=_JSON_SEPARATORS).encode(),
        )

    def parse_chat(self, content: bytes) -> ChatReply:
        try:
            parsed = json.loads(content)
        except ValueError:
            raise MalformedReply("a body that is not JSON") from None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("choices"), list):
            raise MalformedReply("no completion")
        return ChatReply(
            body=parsed, usage=usage_from_openai(parsed.get("usage")), text=completion_text(parsed)
        )

    def stream_parser(self) -> StreamParser:
        return OpenAIStreamParser()

    def error_body(self, content: bytes) -> dict[str, Any] | None:
        try:
            parsed = json.loads(content.decode("utf-8", "replace"))
        except ValueError:
            return None
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            return {"error": parsed["error"]}
        return None
