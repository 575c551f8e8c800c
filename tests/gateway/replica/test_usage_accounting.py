"""Usage: reported wins, else estimated and marked, else missing (never $0)."""

from __future__ import annotations

from gateway.domain.pricing import TokenUsage
from gateway.domain.usage_record import UsageSource
from gateway.replica.usage_accounting import account

MESSAGES = [{"role": "user", "content": "How many tokens is this sentence?"}]


def test_reported_usage_is_taken_as_it_is():
    reported = TokenUsage(prompt_tokens=100, cached_prompt_tokens=60, completion_tokens=40)
    accounted = account(reported, messages=MESSAGES, completion="ignored")
    assert accounted.source is UsageSource.PROVIDER and accounted.usage == reported


def test_without_usage_the_tokens_are_estimated_offline():
    accounted = account(None, messages=MESSAGES, completion="Seven or so.")
    assert accounted.source is UsageSource.ESTIMATED
    assert accounted.usage.prompt_tokens > 7 and accounted.usage.completion_tokens >= 3


def test_with_nothing_to_count_the_usage_is_missing():
    assert account(None, messages=None, completion=None).source is UsageSource.MISSING
    assert account(None, messages=MESSAGES, completion=None).source is UsageSource.MISSING
