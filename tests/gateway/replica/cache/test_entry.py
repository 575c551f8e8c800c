from __future__ import annotations

import json

import pytest

from gateway.domain.pricing import TokenUsage
from gateway.domain.usage_record import UsageSource
from gateway.replica.cache.entry import CacheEntry


def test_an_entry_round_trips_through_its_bytes() -> None:
    usage = TokenUsage(prompt_tokens=10, cached_prompt_tokens=2, completion_tokens=5,
                       reasoning_tokens=1, cache_write_tokens=3)
    body = json.dumps({"id": "x", "n": "é\nline"}, ensure_ascii=False).encode()
    for entry in (
        CacheEntry("gpt-4o", 1.5, usage, UsageSource.PROVIDER, body=body),
        CacheEntry("gpt-4o", 2.0, None, UsageSource.MISSING, chunks=({"a": 1}, {"b": "x\ny"})),
        CacheEntry("gpt-4o", 2.0, None, UsageSource.ESTIMATED, chunks=()),
    ):
        assert CacheEntry.from_bytes(entry.to_bytes()) == entry


def test_a_plain_entry_keeps_the_body_bytes_as_they_were_sent() -> None:
    body = b'{"b":1,"a":"\\u00e9"}'  # an order and an escape a re-encoding would change
    entry = CacheEntry("gpt-4o", 1.0, None, UsageSource.MISSING, body=body)
    assert entry.to_bytes().endswith(b"\n" + body)
    assert CacheEntry.from_bytes(entry.to_bytes()).body == body


@pytest.mark.parametrize("data", [b"", b"garbage", b'{"model": "x"}', b"[1,2]\n{}"])
def test_foreign_bytes_are_refused(data: bytes) -> None:
    with pytest.raises((ValueError, TypeError, KeyError)):
        CacheEntry.from_bytes(data)
