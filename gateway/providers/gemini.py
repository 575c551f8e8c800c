"""Gemini's native API: `POST {base_url}/models/{model}:generateContent`, and
`:streamGenerateContent?alt=sse` for streams, with the key in `x-goog-api-key`.

Chat completions are translated both ways (`gemini_translate`). A Gemini stream has no
`[DONE]`: its last chunk carries the finish reason and the whole usage, and the body ends.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

from gateway.domain import json_codec
from gateway.domain.config import Provider
from gateway.domain.endpoints import Endpoint
from gateway.domain.pricing import TokenUsage
from gateway.providers.adapter import ChatReply, MalformedReply, StreamParser, WireRequest
from gateway.providers.anthropic_replies import openai_usage
from gateway.providers.gemini_translate import (
    candidate_message,
    chat_to_gemini,
    finish_reason,
    usage_from_gemini,
)
from gateway.providers.openai import completion_text
from gateway.providers.responses_chat.over_chat import (
    parse_response,
    responses_request,
    responses_stream,
)


def _answer(payload: bytes) -> dict[str, Any]:
    try:
        parsed = json_codec.loads(payload)
    except ValueError:
        raise MalformedReply("a body that is not JSON") from None
    if not isinstance(parsed, dict):
        raise MalformedReply("an answer that is not a JSON object")
    if isinstance(parsed.get("error"), dict):
        raise MalformedReply(f"an error mid-answer ({parsed['error'].get('status', 'unknown')})")
    return parsed


def _candidates(answer: dict[str, Any]) -> list[dict[str, Any]]:
    found = answer.get("candidates")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


class GeminiChatStream:
    """Gemini's stream chunks as OpenAI chat chunks."""

    __slots__ = ("_calls", "_done", "_finished", "_id", "_model", "_started", "_text",
                 "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._usage: TokenUsage | None = None
        self._finished = self._done = False
        self._id, self._model = "", ""
        self._started: set[int] = set()
        self._calls: dict[int, int] = {}  # candidate -> tool calls so far

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

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self._id, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": self._model, "choices": choices}

    def feed(self, payload: bytes) -> list[dict[str, Any]]:
        answer = _answer(payload)
        self._id = self._id or str(answer.get("responseId") or "")
        self._model = self._model or str(answer.get("modelVersion") or "")
        usage = usage_from_gemini(answer.get("usageMetadata"))
        if usage is not None:
            self._usage = usage  # each chunk's usage is the whole answer's so far
        out: list[dict[str, Any]] = []
        for position, candidate in enumerate(_candidates(answer)):
            index = candidate.get("index", position)
            message = candidate_message(candidate, f"{self._id}_{index}")
            delta: dict[str, Any] = {}
            if index not in self._started:
                self._started.add(index)
                delta["role"] = "assistant"
            if message["content"]:
                delta["content"] = message["content"]
                self._text.append(message["content"])
            calls = message.get("tool_calls") or []
            if calls:
                first = self._calls.get(index, 0)
                self._calls[index] = first + len(calls)
                delta["tool_calls"] = [{"index": first + k, **call}
                                       for k, call in enumerate(calls)]
                self._text.extend(c["function"]["arguments"] for c in calls)
            finish = finish_reason(candidate, bool(self._calls.get(index)))
            if delta or finish:
                out.append({"index": index, "delta": delta, "logprobs": None,
                            "finish_reason": finish})
            if finish:
                self._finished = True
        chunks = [self._chunk(out)] if out else []
        if self._finished:
            # the chunk with the finish reason is Gemini's last, with the whole usage
            self._done = True
            if self._usage is not None:
                chunks.append(self._chunk([]) | {"usage": openai_usage(self._usage)})
        return chunks


class GeminiAdapter:
    kind = "gemini"
    # Responses go through chat, translated (Messages too, in its own route)
    endpoints = frozenset({Endpoint.CHAT_COMPLETIONS, Endpoint.RESPONSES})

    def endpoint_request(
        self, provider: Provider, endpoint: Endpoint, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        if endpoint is Endpoint.RESPONSES:
            return responses_request(self, provider, body, api_key)
        return self.chat_request(provider, body, api_key)

    def parse_endpoint(self, endpoint: Endpoint, content: bytes) -> ChatReply:
        if endpoint is Endpoint.RESPONSES:
            return parse_response(self, content)
        return self.parse_chat(content)

    def endpoint_stream_parser(self, endpoint: Endpoint) -> StreamParser:
        if endpoint is Endpoint.RESPONSES:
            return responses_stream(self)
        return self.stream_parser()

    def chat_request(
        self, provider: Provider, body: dict[str, Any], api_key: str | None
    ) -> WireRequest:
        model = quote(str(body["model"]), safe="")
        stream = bool(body.get("stream"))
        action = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        headers = {"content-type": "application/json",
                   "accept": "text/event-stream" if stream else "application/json"}
        if api_key:
            headers["x-goog-api-key"] = api_key
        return WireRequest(
            url=f"{provider.base_url.rstrip('/')}/models/{model}{action}",
            headers=headers,
            content=json_codec.dumps(chat_to_gemini(body)),
        )

    def parse_chat(self, content: bytes) -> ChatReply:
        answer = _answer(content)
        candidates = _candidates(answer)
        if not candidates:
            raise MalformedReply("no candidates")
        answer_id = str(answer.get("responseId") or "")
        choices = []
        for position, candidate in enumerate(candidates):
            index = candidate.get("index", position)
            message = candidate_message(candidate, f"{answer_id}_{index}")
            choices.append({"index": index, "message": message, "logprobs": None,
                            "finish_reason": finish_reason(candidate,
                                                           bool(message.get("tool_calls")))
                            or "stop"})
        usage = usage_from_gemini(answer.get("usageMetadata"))
        body: dict[str, Any] = {"id": answer_id, "object": "chat.completion",
                                "created": int(time.time()),
                                "model": str(answer.get("modelVersion") or ""),
                                "choices": choices}
        if usage is not None:
            body["usage"] = openai_usage(usage)
        return ChatReply(body=body, usage=usage, text=completion_text(body))

    def stream_parser(self) -> StreamParser:
        return GeminiChatStream()

    def error_body(self, content: bytes) -> dict[str, Any] | None:
        """Google's `{"error": {"code", "message", "status"}}` in OpenAI's shape."""
        try:
            parsed = json.loads(content.decode("utf-8", "replace"))
        except ValueError:
            return None
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if not isinstance(error, dict):
            return None
        return {"error": {"message": str(error.get("message") or ""),
                          "type": "invalid_request_error", "param": None,
                          "code": str(error.get("status") or "") or None}}
