"""What one cache entry holds, and its bytes: the answer and what serving it cost. Pure.

A plain answer is its JSON body as it was sent (the bytes the response rendered, stored
and served as they are: a miss encodes nothing twice, a hit parses nothing); a stream is
its events as the provider's parser gave them (usage chunk included), replayed one by one
through the API's client format, so a streamed hit arrives in as many chunks as the
original. The model that answered and its token counts price the hit "as if served":
list and baseline cost, for the savings.

The bytes: one line of JSON about the entry, a newline, then the body (or the events as a
JSON array). JSON without indentation has no raw newline, so the first one ends the line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gateway.domain import json_codec
from gateway.domain.pricing import TokenUsage
from gateway.domain.usage_record import UsageSource

_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(TokenUsage))


@dataclasses.dataclass(frozen=True, slots=True)
class CacheEntry:
    model: str  # the configured model that answered
    stored_at: float  # epoch seconds
    usage: TokenUsage | None
    usage_source: UsageSource
    body: bytes | None = None  # a plain answer: its JSON, as sent
    chunks: tuple[dict[str, Any], ...] | None = None  # a stream's events

    def to_bytes(self) -> bytes:
        u = self.usage
        usage = None if u is None else {name: getattr(u, name) for name in _USAGE_FIELDS}
        head: list[Any] = [self.model, self.stored_at, self.usage_source.value, usage]
        if self.body is not None:
            return json_codec.dumps(head) + b"\n" + self.body
        return json_codec.dumps(head + ["chunks"]) + b"\n" + json_codec.dumps(
            list(self.chunks or ()))

    @classmethod
    def from_bytes(cls, data: bytes) -> CacheEntry:
        line, sep, rest = data.partition(b"\n")
        if not sep:
            raise ValueError("not a cache entry")
        head = json_codec.loads(line)
        model, stored_at, source, usage = head[:4]
        streamed = head[4:] == ["chunks"]
        return cls(
            model=str(model),
            stored_at=float(stored_at),
            usage=None if usage is None else TokenUsage(**usage),
            usage_source=UsageSource(source),
            body=None if streamed else rest,
            chunks=tuple(json_codec.loads(rest)) if streamed else None,
        )
