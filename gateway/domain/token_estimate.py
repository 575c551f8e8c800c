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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import bpe_openai

DEFAULT_ENCODING = "o200k_base"
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3


@lru_cache(maxsize=16)
def _encoding(model: str | None) -> bpe_openai.Encoding:
    # imported on first use: it reads its vocabularies as it is imported (0.6 s), which a
    # replica does after it answers (`warm_up`), not on its way to start
    import bpe_openai

    name = DEFAULT_ENCODING
    if model:
        try:
            name = bpe_openai.encoding_name_for_model(model)
        except (bpe_openai.UnsupportedModelError, KeyError, ValueError):
            name = DEFAULT_ENCODING
    return bpe_openai.get_encoding(name)


def warm_up() -> None:
    """Load the default vocabulary now (the first estimate then costs no load)."""
    _encoding(None)


# bpe-openai refuses a text of 1,000,000 characters or more, and one call of more than
# 200,000 tokens: a long text is counted in pieces of at most this many characters (a
# character is at most 4 byte tokens, so a piece stays under both limits)
PIECE_CHARS = 32_768
# a piece ends at the last whitespace within this many characters of its end, so that
# cutting rarely splits a word (a split word counts a token or two more: still a bound)
_PIECE_SLACK = 256


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in `text`, of any length. Special-token markers in it (e.g.
    `<|endoftext|>`) count as plain text: an estimate must never raise on what a user
    typed."""
    if not text:
        return 0
    encoding = _encoding(model)
    if len(text) <= PIECE_CHARS:
        return len(encoding.encode_ordinary(text))
    total, start = 0, 0
    while start < len(text):
        end = min(start + PIECE_CHARS, len(text))
        if end < len(text):
            cut = max(text.rfind(" ", end - _PIECE_SLACK, end),
                      text.rfind("\n", end - _PIECE_SLACK, end))  # fmt: skip
            if cut > start:
                end = cut
        total += len(encoding.encode_ordinary(text[start:end]))
        start = end
    return total


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
