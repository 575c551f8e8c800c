"""Token counts and token-sized text for the simulator, offline (bpe-openai's o200k_base).

Prompt tokens follow OpenAI's chat accounting (a few tokens of framing per message, plus
3 to prime the reply), so a gateway estimating with the same tokenizer gets the same
figures. Completions are cut from a corpus in which every piece is exactly one token:
any run of n pieces re-tokenizes to n tokens, and streaming sends one piece per chunk,
without tokenizing anything on the request path.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import bpe_openai

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
IMAGE_TOKENS = 85  # OpenAI's figure for a low-detail image

_WORDS_TEXT = (
    "the of and to in is that for it as with was on be by this are from at or an"
    " have not which but all were when there can more has one will their so what about"
    " if out up into time only new some could these two may then first any like other"
    " than now over such our through most after also how where many well because each"
    " just those people used way make between world under state both life being here"
    " cost gateway model token price budget request stream route latency answer data"
    " service value system team report month number result order market team plan"
)


@cache
def encoding() -> bpe_openai.Encoding:
    return bpe_openai.get_encoding("o200k_base")


@lru_cache(maxsize=8192)
def count_text(text: str) -> int:
    # cached: benchmarks and demos send the same prompts over and over
    return len(encoding().encode_ordinary(text))


def _content_tokens(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return count_text(content)
    total = 0
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            total += count_text(part["text"])
        elif isinstance(part, dict) and part.get("type") in ("image_url", "input_image"):
            total += IMAGE_TOKENS
        else:
            total += count_text(json.dumps(part, sort_keys=True))
    return total


def message_tokens(message: dict[str, Any]) -> int:
    total = TOKENS_PER_MESSAGE + count_text(str(message.get("role", "")))
    total += _content_tokens(message.get("content"))
    if isinstance(message.get("name"), str):
        total += count_text(message["name"]) + TOKENS_PER_NAME
    if message.get("tool_calls"):
        total += count_text(json.dumps(message["tool_calls"], sort_keys=True))
    if isinstance(message.get("tool_call_id"), str):
        total += count_text(message["tool_call_id"])
    return total


def tools_tokens(tools: Sequence[Any] | None) -> int:
    return count_text(json.dumps(list(tools), sort_keys=True)) if tools else 0


def tokenize_pieces(text: str) -> tuple[str, ...]:
    """The text cut at its token boundaries (for JSON content and tool arguments)."""
    enc = encoding()
    return tuple(enc.decode_single_token_bytes(t).decode() for t in enc.encode_ordinary(text))


@dataclass(frozen=True)
class Corpus:
    """One-token pieces of plausible text; any run of them is valid content of its length.

    The tuples hold the text twice over, so a run that wraps past the end is one slice.
    """

    pieces: tuple[str, ...]
    # each piece already JSON-encoded, for building stream chunks without json.dumps
    pieces_json: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.pieces) // 2

    def run(self, start: int, n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """n consecutive pieces from `start` (and their JSON), wrapping around the end."""
        start %= self.size
        if n <= self.size:
            return self.pieces[start:start + n], self.pieces_json[start:start + n]
        head, head_json = self.run(start, self.size)
        rest, rest_json = self.run(start + self.size, n - self.size)
        return head + rest, head_json + rest_json

    def text(self, start: int, n: int) -> str:
        return "".join(self.run(start, n)[0])


@cache
def corpus(size: int = 8192, seed: int = 7) -> Corpus:
    enc = encoding()
    words = [w for w in _WORDS_TEXT.split() if len(enc.encode_ordinary(" " + w)) == 1]
    rng = random.Random(seed)
    pieces: list[str] = []
    while len(pieces) < size - 1:
        pieces.append(" " + rng.choice(words))
        # punctuation is its own token; never two in a row, never at either end
        if rng.random() < 0.12 and len(pieces) < size - 2:
            pieces.append(rng.choice((".", ".", ",")))
    pieces.append(" " + rng.choice(words))
    encoded = [json.dumps(p) for p in pieces]
    return Corpus(tuple(pieces * 2), tuple(encoded * 2))
