from __future__ import annotations

from gateway.domain.pricing import TokenUsage
from gateway.domain.usage_record import UsageSource
from gateway.replica.cache.entry import CacheEntry


def test_an_entry_round_trips_through_its_bytes() -> None:
    usage = TokenUsage(prompt_tokens=10, cached_prompt_tokens=2, completion_tokens=5)
    for entry in (
        CacheEntry("gpt-4o", 1.5, usage, UsageSource.PROVIDER, body={"id": "x", "n": "é"}),
        CacheEntry("gpt-4o", 2.0, None, UsageSource.MISSING, chunks=({"a": 1}, {"b": None})),
    ):
        assert CacheEntry.from_bytes(entry.to_bytes()) == entry
