"""Offline token counts, for usage the upstream did not report (records say "estimated").

`bpe-openai` ships the `o200k_base` and `cl100k_base` vocabularies inside the wheel, so
nothing is downloaded at run time (tiktoken would fetch its files on first use). OpenAI
models get their own encoding; every other model (Claude, Gemini, DeepSeek...) is counted
with `o200k_base`: their tokenizers differ, and an estimate is all it claims to be.

Prompt estimates follow OpenAI's published approximation for chat messages: 3 tokens of
framing per message, 1 more when it has a `name`, and 3 that prime the assistant's reply.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import bpe_openai

DEFAULT_ENCODING = "o200k_base"
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3


@lru_cache(maxsize=16)
def _encoding(model: str | None) -> bpe_openai.Encoding:
    name = DEFAULT_ENCODING
    if model:
        try:
            name = bpe_openai.encoding_name_for_model(model)
        except (bpe_openai.UnsupportedModelError, KeyError, ValueError):
            name = DEFAULT_ENCODING
    return bpe_openai.get_encoding(name)


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in `text`. Special-token markers in it (e.g. `<|endoftext|>`) count as plain
    text: an estimate must never raise on what a user typed."""
    if not text:
        return 0
    return len(_encoding(model).encode_ordinary(text))


def _content_tokens(value: Any, model: str | None) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return count_tokens(value, model)
    if isinstance(value, list):  # content parts: count the text ones, then the rest as JSON
        total = 0
        for part in value:
            if isinstance(part, dict) and part.get("type") == "text":
                total += count_tokens(str(part.get("text") or ""), model)
            else:
                total += _content_tokens(part, model)
        return total
    # tool calls, function calls, anything structured: roughly their JSON
    return count_tokens(json.dumps(value, separators=(",", ":"), ensure_ascii=False), model)


def estimate_prompt_tokens(messages: list[dict[str, Any]], model: str | None = None) -> int:
    """Approximate `prompt_tokens` of a chat completion request's `messages`."""
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += TOKENS_PER_MESSAGE
        for key, value in message.items():
            total += _content_tokens(value, model)
            if key == "name":
                total += TOKENS_PER_NAME
    return total
