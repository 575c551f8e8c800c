"""Offline token estimates: the vocabularies ship in the wheel; prompts follow OpenAI's rule."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from gateway.domain.token_estimate import _encoding, count_tokens, estimate_prompt_tokens

# OpenAI cookbook, "How to count tokens with tiktoken": its example conversation is
# 129 prompt tokens on gpt-4 and 124 on gpt-4o, as the API itself reported them.
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on "
        "opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("token counting tried to open a network connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    _encoding.cache_clear()  # load the vocabularies again, under the ban
    yield


def test_prompt_estimate_matches_openais_published_counts(no_network: None) -> None:
    assert estimate_prompt_tokens(COOKBOOK_MESSAGES, "gpt-4o") == 124
    assert estimate_prompt_tokens(COOKBOOK_MESSAGES, "gpt-4") == 129


def test_counts_text_with_the_models_encoding(no_network: None) -> None:
    assert count_tokens("hello world, how are you?", "gpt-4.1") == 7
    assert count_tokens("") == 0


def test_models_outside_openais_list_are_counted_with_o200k(no_network: None) -> None:
    text = "Bonjour, comment ça va ?"
    assert count_tokens(text, "claude-sonnet-4-5") == count_tokens(text, "gpt-4o")
    assert count_tokens(text, None) == count_tokens(text, "gpt-4o")


def test_special_token_markers_in_user_text_count_as_text_and_never_raise() -> None:
    assert count_tokens("a <|endoftext|> b") > 3


def test_content_parts_and_tool_calls_are_counted() -> None:
    text_only = [{"role": "user", "content": "describe this picture please"}]
    text_part = {"type": "text", "text": "describe this picture please"}
    parts = [{"role": "user", "content": [text_part]}]
    assert estimate_prompt_tokens(parts) == estimate_prompt_tokens(text_only)
    with_tool = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "lookup", "arguments": '{"city":"Paris"}'}}],
        }
    ]
    assert estimate_prompt_tokens(with_tool) > estimate_prompt_tokens([{"role": "assistant"}])


def test_empty_conversation_costs_only_the_reply_priming() -> None:
    assert estimate_prompt_tokens([]) == 3


@pytest.mark.parametrize(
    "text",
    ["a" * 1_000_000, "hello world " * 200_000, "\u4e2d\u6587" * 600_000, "\U0001f600" * 300_000],
)
def test_texts_of_a_million_characters_and_more_are_counted_in_pieces(text):
    counted = count_tokens(text)
    assert counted > 0
    # the pieces count (about) what one call counts on the first piece's scale
    piece = text[: len(text) // 8]
    assert counted >= 7 * count_tokens(piece)


def test_counting_in_pieces_matches_one_call_on_plain_prose():
    text = "hello world, how are you? " * 20_000  # 520,000 characters: pieces
    assert count_tokens(text) == len(_encoding(None).encode_ordinary(text))
