"""OpenAI's wire formats: OpenAI itself and every compatible relay.

The request path already speaks these shapes, so the adapter translates nothing: it adds
the Bearer key and each API's path (chat completions, legacy completions, embeddings,
Responses), checks that answers are what the API promises, reads usage (with cached and
reasoning tokens from their details) and the text of each chunk or event, for estimates
when a stream ends without usage.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.domain import json_codec
from gateway.domain.config import Provider
from gateway.domain.endpoints import Endpoint
from gateway.domain.pricing import TokenUsage, service_tier_name
from gateway.providers.adapter import ChatReply, MalformedReply, StreamParser, WireRequest
from gateway.providers.sse import DONE

_JSON_SEPARATORS = (",", ":")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_from_openai(
    usage: Any, service_tier: Any = None, web_search_calls: int = 0
) -> TokenUsage | None:
    """OpenAI's usage object, with cached and reasoning tokens from their details; the
    tier the answer says it was served at (`service_tier` beside the usage)."""
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
        web_search_calls=web_search_calls,
        service_tier=service_tier_name(service_tier),
    )


def _body_usage(body: dict[str, Any]) -> TokenUsage | None:
    return usage_from_openai(body.get("usage"), body.get("service_tier"))


def usage_from_responses(response: dict[str, Any]) -> TokenUsage | None:
    """A Responses body's usage: input/output tokens, with cached and reasoning details,
    its service tier, and its web search calls (one `web_search_call` output item each:
    the usage object does not count them)."""
    usage = response.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
        return None
    searches = sum(
        1 for item in response.get("output") or ()
        if isinstance(item, dict) and item.get("type") == "web_search_call"
    )  # fmt: skip
    return usage_from_openai(
        {
            "prompt_tokens": usage.get("input_tokens"),
            "completion_tokens": usage.get("output_tokens"),
            "prompt_tokens_details": usage.get("input_tokens_details"),
            "completion_tokens_details": usage.get("output_tokens_details"),
        },
        response.get("service_tier"),
        searches,
    )


def response_text(response: dict[str, Any]) -> str:
    """The generated text of a Responses body (messages and tool-call arguments)."""
    parts: list[str] = []
    for item in response.get("output") or ():
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("arguments"), str):
            parts.append(item["arguments"])
        for block in item.get("content") or ():
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
    return "".join(parts)


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

    __slots__ = ("_done", "_finished", "_text", "_usage", "finish_reason")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._usage: TokenUsage | None = None
        self._finished = False
        self._done = False
        self.finish_reason: Any = None  # the last one the upstream sent (a quality signal)

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
            chunk = json_codec.loads(payload)
        except ValueError as err:
            raise MalformedReply(f"an upstream stream chunk is not JSON: {err}") from None
        if not isinstance(chunk, dict):
            raise MalformedReply("an upstream stream chunk is not a JSON object")
        usage = usage_from_openai(chunk.get("usage"), chunk.get("service_tier"))
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
                elif isinstance(choice.get("text"), str):  # a legacy completion's chunk
                    self._text.append(choice["text"])
                if finish := choice.get("finish_reason"):
                    self._finished, self.finish_reason = True, finish
        return [chunk]


# Responses events after which nothing more comes; each carries the response (and usage)
_RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class ResponsesStreamParser:
    """Responses events pass through as they are; usage comes with the terminal event
    (`response.completed`, or `response.incomplete`/`response.failed` when present)."""

    __slots__ = ("_done", "_status", "_text", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._usage: TokenUsage | None = None
        self._done = False
        self._status: str | None = None

    @property
    def finished(self) -> bool:
        return self._done

    @property
    def done(self) -> bool:
        return self._done

    @property
    def usage(self) -> TokenUsage | None:
        return self._usage

    @property
    def status(self) -> str | None:
        """The response's final status (completed, incomplete, failed), None before."""
        return self._status

    def text(self) -> str:
        return "".join(self._text)

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        try:
            event = json_codec.loads(payload)
        except ValueError as err:
            raise MalformedReply(f"an upstream Responses event is not JSON: {err}") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise MalformedReply("an upstream Responses event without a type")
        kind = event["type"]
        if kind in ("response.output_text.delta", "response.function_call_arguments.delta"):
            if isinstance(event.get("delta"), str):
                self._text.append(event["delta"])
        elif kind in _RESPONSE_ENDS:
            response = event.get("response")
            if isinstance(response, dict):
                self._usage = usage_from_responses(response) or self._usage
                status = response.get("status")
                self._status = status if isinstance(status, str) else kind.split(".")[1]
            self._done = True
        return [event]


_PATHS = {
    Endpoint.CHAT_COMPLETIONS: "/chat/completions",
    Endpoint.COMPLETIONS: "/completions",
    Endpoint.EMBEDDINGS: "/embeddings",
    Endpoint.RESPONSES: "/responses",
}


def _parse_object(content: bytes) -> dict[str, Any]:
    try:
        parsed = json_codec.loads(content)
    except ValueError:
        raise MalformedReply("a body that is not JSON") from None
    if not isinstance(parsed, dict):
        raise MalformedReply("a body that is not a JSON object")
    return parsed


class OpenAIAdapter:
    kind = "openai"
    endpoints = frozenset(_PATHS)

    def chat_request(
        self, provider: Provider, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        return self.endpoint_request(provider, Endpoint.CHAT_COMPLETIONS, body, api_key)

    def endpoint_request(
        self, provider: Provider, endpoint: Endpoint, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return WireRequest(
            url=provider.base_url.rstrip("/") + _PATHS[endpoint],
            headers=headers,
            content=json_codec.dumps(body),
        )

    def parse_endpoint(self, endpoint: Endpoint, content: bytes) -> ChatReply:
        if endpoint is Endpoint.CHAT_COMPLETIONS:
            return self.parse_chat(content)
        parsed = _parse_object(content)
        if endpoint is Endpoint.EMBEDDINGS:
            if not isinstance(parsed.get("data"), list):
                raise MalformedReply("no embeddings")
            return ChatReply(parsed, _body_usage(parsed), "")
        if endpoint is Endpoint.RESPONSES:
            if not isinstance(parsed.get("output"), list):
                raise MalformedReply("no response")
            usage = usage_from_responses(parsed)
            return ChatReply(parsed, usage, response_text(parsed))
        if not isinstance(parsed.get("choices"), list):
            raise MalformedReply("no completion")
        text = "".join(
            c["text"]
            for c in parsed["choices"]
            if isinstance(c, dict) and isinstance(c.get("text"), str)
        )
        return ChatReply(parsed, _body_usage(parsed), text)

    def endpoint_stream_parser(self, endpoint: Endpoint) -> StreamParser:
        if endpoint is Endpoint.RESPONSES:
            return ResponsesStreamParser()
        return OpenAIStreamParser()  # legacy completions stream chat-like chunks

    def parse_chat(self, content: bytes) -> ChatReply:
        try:
            parsed = json_codec.loads(content)
        except ValueError:
            raise MalformedReply("a body that is not JSON") from None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("choices"), list):
            raise MalformedReply("no completion")
        return ChatReply(
            body=parsed, usage=_body_usage(parsed), text=completion_text(parsed)
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
