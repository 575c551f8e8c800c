"""Usage: reported wins, else estimated and marked, else missing (never $0)."""

from __future__ import annotations

from gateway.domain.usage_record import UsageSource
from gateway.replica.usage_accounting import account, completion_text, usage_from_openai

MESSAGES = [{"role": "user", "content": "How many tokens is this sentence?"}]


def test_reported_usage_with_cached_and_reasoning_details():
    u = usage_from_openai({"prompt_tokens": 100, "completion_tokens": 40,
                           "prompt_tokens_details": {"cached_tokens": 60},
                           "completion_tokens_details": {"reasoning_tokens": 10}})
    assert (u.prompt_tokens, u.cached_prompt_tokens, u.completion_tokens,
            u.reasoning_tokens) == (100, 60, 40, 10)


def test_inconsistent_details_are_clamped_not_trusted():
    u = usage_from_openai({"prompt_tokens": 10, "completion_tokens": 1,
                           "prompt_tokens_details": {"cached_tokens": 99},
                           "completion_tokens_details": {"reasoning_tokens": 5}})
    assert u.cached_prompt_tokens == 10 and u.reasoning_tokens == 1


def test_without_usage_the_tokens_are_estimated_offline():
    accounted = account(None, messages=MESSAGES, completion="Seven or so.")
    assert accounted.source is UsageSource.ESTIMATED
    assert accounted.usage.prompt_tokens > 7 and accounted.usage.completion_tokens >= 3


def test_with_nothing_to_count_the_usage_is_missing():
    assert account(None, messages=None, completion=None).source is UsageSource.MISSING
    assert account({"prompt_tokens": "x"}, messages=None, completion="").source \
        is UsageSource.MISSING


def test_completion_text_covers_every_choice_and_tool_arguments():
    body = {"choices": [
        {"message": {"content": "a"}},
        {"message": {"content": None, "tool_calls": [
            {"function": {"name": "f", "arguments": "{\"x\": 1}"}}]}},
    ]}
    assert completion_text(body) == "a{\"x\": 1}"
