"""Serving the Responses API through any adapter's chat methods: the request translated
to chat, the answer and the stream translated back."""

from __future__ import annotations

from typing import Any

from gateway.domain.config import Provider
from gateway.providers.adapter import ChatReply, ProviderAdapter, WireRequest
from gateway.providers.responses_chat.replies import completion_to_response
from gateway.providers.responses_chat.requests import responses_to_chat
from gateway.providers.responses_chat.stream import ChatToResponsesStream


def responses_request(adapter: ProviderAdapter, provider: Provider, body: dict[str, Any],
                      api_key: str | None) -> WireRequest:
    return adapter.chat_request(provider, responses_to_chat(body), api_key)


def parse_response(adapter: ProviderAdapter, content: bytes) -> ChatReply:
    reply = adapter.parse_chat(content)
    return ChatReply(body=completion_to_response(reply.body, reply.usage), usage=reply.usage,
                     text=reply.text)


def responses_stream(adapter: ProviderAdapter) -> ChatToResponsesStream:
    return ChatToResponsesStream(adapter.stream_parser())
