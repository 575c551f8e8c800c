from __future__ import annotations

from gateway.domain.endpoints import Endpoint
from gateway.replica.cache.key import cache_key

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}


def test_the_key_is_scoped_to_the_app_and_the_api() -> None:
    a = cache_key("a", Endpoint.CHAT_COMPLETIONS, BODY)
    assert a == cache_key("a", Endpoint.CHAT_COMPLETIONS, dict(reversed(list(BODY.items()))))
    assert a != cache_key("b", Endpoint.CHAT_COMPLETIONS, BODY)
    assert a != cache_key("a", Endpoint.RESPONSES, BODY)


def test_every_generation_parameter_changes_the_key_but_stream_and_its_options_do_not() -> None:
    base = cache_key("a", Endpoint.CHAT_COMPLETIONS, BODY)
    for extra in (
        {"temperature": 0.5},
        {"max_tokens": 10},
        {"seed": 1},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"response_format": {"type": "json_object"}},
        {"model": "gpt-4o-mini"},
        {"some_new_field": 1},
    ):
        assert cache_key("a", Endpoint.CHAT_COMPLETIONS, BODY | extra) != base, extra
    usage = BODY | {"stream_options": {"include_usage": True}}
    assert cache_key("a", Endpoint.CHAT_COMPLETIONS, usage) == base
    # one entry answers a plain and a streamed request
    streamed = usage | {"stream": True}
    assert cache_key("a", Endpoint.CHAT_COMPLETIONS, streamed) == base


def test_the_routing_headers_that_change_the_answer_change_the_key() -> None:
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    plain = cache_key("app", Endpoint.CHAT_COMPLETIONS, body)
    assert cache_key("app", Endpoint.CHAT_COMPLETIONS, body, {}) == plain
    assert cache_key("app", Endpoint.CHAT_COMPLETIONS, body, {"x-other": "1"}) == plain
    seen = {plain}
    for header, value in (("x-costgate-model", "gpt-4.1"), ("x-costgate-priority", "high"),
                          ("x-costgate-no-fallback", "1"), ("x-costgate-trim", "drop_oldest"),
                          ("anthropic-version", "2023-06-01"),
                          ("anthropic-beta", "prompt-caching-2024-07-31")):
        seen.add(cache_key("app", Endpoint.CHAT_COMPLETIONS, body, {header: value}))
        # a blank header is no header
        assert cache_key("app", Endpoint.CHAT_COMPLETIONS, body, {header: "  "}) == plain
    assert len(seen) == 7
