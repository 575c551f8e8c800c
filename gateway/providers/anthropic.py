"""Anthropic's native Messages API: `POST {base_url}/messages` with `x-api-key` and
`anthropic-version`.

Two faces. As a `ProviderAdapter` it serves chat completions, translated both ways
(`anthropic_requests`, `anthropic_replies`, `anthropic_stream`). Natively it serves
`/v1/messages`: the client's body goes out as it came (cache_control blocks, thinking and
all), and answers and events come back as they are, with usage read in our token classes.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.domain import json_codec
from gateway.domain.config import Provider
from gateway.domain.endpoints import Endpoint
from gateway.providers.adapter import ChatReply, MalformedReply, StreamParser, WireRequest
from gateway.providers.anthropic_replies import (
    message_text,
    message_to_completion,
    usage_from_anthropic,
)
from gateway.providers.anthropic_requests import chat_to_messages
from gateway.providers.anthropic_stream import AnthropicChatStream, AnthropicEventStream
from gateway.providers.openai import completion_text
from gateway.providers.responses_chat.over_chat import (
    parse_response,
    responses_request,
    responses_stream,
)

ANTHROPIC_VERSION = "2023-06-01"


def _message(content: bytes) -> dict[str, Any]:
    try:
        parsed = json_codec.loads(content)
    except ValueError:
        raise MalformedReply("a body that is not JSON") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "message" \
            or not isinstance(parsed.get("content"), list):
        raise MalformedReply("no message")
    return parsed


class AnthropicAdapter:
    kind = "anthropic"
    # natively: Messages; chat completions and Responses are translated
    endpoints = frozenset({Endpoint.CHAT_COMPLETIONS, Endpoint.MESSAGES, Endpoint.RESPONSES})

    def endpoint_request(
        self, provider: Provider, endpoint: Endpoint, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        if endpoint is Endpoint.MESSAGES:
            return self.messages_request(provider, body, api_key)
        if endpoint is Endpoint.RESPONSES:
            return responses_request(self, provider, body, api_key)
        return self.chat_request(provider, body, api_key)

    def parse_endpoint(self, endpoint: Endpoint, content: bytes) -> ChatReply:
        if endpoint is Endpoint.MESSAGES:
            return self.parse_messages(content)
        if endpoint is Endpoint.RESPONSES:
            return parse_response(self, content)
        return self.parse_chat(content)

    def endpoint_stream_parser(self, endpoint: Endpoint) -> StreamParser:
        if endpoint is Endpoint.MESSAGES:
            return self.messages_stream_parser()
        if endpoint is Endpoint.RESPONSES:
            return responses_stream(self)
        return self.stream_parser()

    def messages_request(
        self,
        provider: Provider,
        body: dict[str, Any],
        api_key: str | None,
        version: str | None = None,
        beta: str | None = None,
    ) -> WireRequest:
        """The native request: a Messages body, sent as it is."""
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if body.get("stream") else "application/json",
            "anthropic-version": version or ANTHROPIC_VERSION,
        }
        if beta:
            headers["anthropic-beta"] = beta
        if api_key:
            headers["x-api-key"] = api_key
        return WireRequest(
            url=provider.base_url.rstrip("/") + "/messages",
            headers=headers,
            content=json_codec.dumps(body),
        )

    def parse_messages(self, content: bytes) -> ChatReply:
        """A native answer: the message as it came, its usage and its text."""
        message = _message(content)
        return ChatReply(body=message, usage=usage_from_anthropic(message.get("usage")),
                         text=message_text(message))

    def messages_stream_parser(self) -> AnthropicEventStream:
        return AnthropicEventStream()

    # -- chat completions, translated --------------------------------------------------------

    def chat_request(
        self, provider: Provider, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        return self.messages_request(provider, chat_to_messages(body, body["model"]), api_key)

    def parse_chat(self, content: bytes) -> ChatReply:
        message = _message(content)
        completion = message_to_completion(message)
        return ChatReply(body=completion, usage=usage_from_anthropic(message.get("usage")),
                         text=completion_text(completion))

    def stream_parser(self) -> StreamParser:
        return AnthropicChatStream()

    def error_body(self, content: bytes) -> dict[str, Any] | None:
        """Anthropic's `{"type": "error", "error": {"type", "message"}}` in OpenAI's shape
        (its `type` kept, so `/v1/messages` can hand it back as Anthropic's again)."""
        try:
            parsed = json.loads(content.decode("utf-8", "replace"))
        except ValueError:
            return None
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if not isinstance(error, dict):
            return None
        return {"error": {"message": str(error.get("message") or ""),
                          "type": str(error.get("type") or "invalid_request_error"),
                          "param": None, "code": None}}
