"""What one cache entry holds, and its bytes: the answer and what serving it cost. Pure.

A plain answer is its JSON body; a stream is its events as the provider's parser gave
them (usage chunk included), replayed one by one through the API's client format, so a
streamed hit arrives in as many chunks as the original. The model that answered and its
token counts price the hit "as if served": list and baseline cost, for the savings.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from gateway.domain.pricing import TokenUsage
from gateway.domain.usage_record import UsageSource


@dataclasses.dataclass(frozen=True, slots=True)
class CacheEntry:
    model: str  # the configured model that answered
    stored_at: float  # epoch seconds
    usage: TokenUsage | None
    usage_source: UsageSource
    body: dict[str, Any] | None = None  # a plain answer
    chunks: tuple[dict[str, Any], ...] | None = None  # a stream's events

    def to_bytes(self) -> bytes:
        d = {
            "model": self.model,
            "stored_at": self.stored_at,
            "usage": None if self.usage is None else dataclasses.asdict(self.usage),
            "usage_source": self.usage_source.value,
            "body": self.body,
            "chunks": None if self.chunks is None else list(self.chunks),
        }
        return json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> CacheEntry:
        d = json.loads(data)
        usage = d.get("usage")
        chunks = d.get("chunks")
        return cls(
            model=str(d["model"]),
            stored_at=float(d["stored_at"]),
            usage=None if usage is None else TokenUsage(**usage),
            usage_source=UsageSource(d["usage_source"]),
            body=d.get("body"),
            chunks=None if chunks is None else tuple(chunks),
        )
