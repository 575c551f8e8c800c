"""Request validation: what passes through, what is refused and with which `param`."""

from __future__ import annotations

import json

import pytest

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.chat_request import parse_json_body, upstream_body, validate_chat_request

MSG = [{"role": "user", "content": "hi"}]


def test_unknown_fields_and_openai_parameters_pass_through_with_the_upstream_id():
    req = validate_chat_request(
        {"model": "auto", "messages": MSG, "temperature": 0.2, "tools": [], "vendor_x": 1})
    body = upstream_body(req, "deepseek-chat")
    assert body["model"] == "deepseek-chat" and body["vendor_x"] == 1 and body["tools"] == []
    assert req.body["model"] == "auto"  # the client's copy is untouched


def test_streams_always_ask_the_upstream_for_usage_but_remember_what_the_client_asked():
    req = validate_chat_request({"model": "m", "messages": MSG, "stream": True})
    assert not req.include_usage
    assert upstream_body(req, "u")["stream_options"] == {"include_usage": True}
    req = validate_chat_request({"model": "m", "messages": MSG, "stream": True,
                                 "stream_options": {"include_usage": True}})
    assert req.include_usage


def test_the_larger_of_max_tokens_and_max_completion_tokens_bounds_the_worst_case():
    # which one an upstream honours when both are sent is its own affair
    req = validate_chat_request(
        {"model": "m", "messages": MSG, "max_tokens": 50, "max_completion_tokens": 20})
    assert req.max_tokens == 50


def test_n_counts_the_outputs_billed_and_is_at_most_128():
    assert validate_chat_request({"model": "m", "messages": MSG}).outputs == 1
    assert validate_chat_request({"model": "m", "messages": MSG, "n": 128}).outputs == 128
    with pytest.raises(OpenAIError) as err:
        validate_chat_request({"model": "m", "messages": MSG, "n": 129})
    assert (err.value.status, err.value.param) == (400, "n")


@pytest.mark.parametrize("value", [2**31, 10**30, 10**300])
def test_token_limits_beyond_an_int32_are_the_clients_400(value):
    with pytest.raises(OpenAIError) as err:
        validate_chat_request({"model": "m", "messages": MSG, "max_tokens": value})
    assert (err.value.status, err.value.param) == (400, "max_tokens")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": MSG}, "model"),
        ({"model": "", "messages": MSG}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": "hi"}, "messages"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]"),
        ({"model": "m", "messages": [{"content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": MSG, "stream": 1}, "stream"),
        ({"model": "m", "messages": MSG, "temperature": "hot"}, "temperature"),
        ({"model": "m", "messages": MSG, "n": 0}, "n"),
        ({"model": "m", "messages": MSG, "max_completion_tokens": True}, "max_completion_tokens"),
        ({"model": "m", "messages": MSG, "stream_options": []}, "stream_options"),
    ],
)
def test_schema_violations_are_400s_naming_the_param(body, param):
    with pytest.raises(OpenAIError) as info:
        validate_chat_request(body)
    assert info.value.status == 400 and info.value.param == param


def test_json_body_errors():
    with pytest.raises(OpenAIError) as info:
        parse_json_body(b"x" * 11, max_bytes=10)
    assert info.value.status == 413
    for raw in (b"", b"{", b"\xff\xfe"):
        with pytest.raises(OpenAIError) as info:
            parse_json_body(raw, max_bytes=100)
        assert info.value.status == 400 and info.value.code == "invalid_json"
    with pytest.raises(OpenAIError):
        validate_chat_request([1, 2])


@pytest.mark.parametrize("raw", [b"[" * 100_000, b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
                                 b'{"model": "m", "messages": ' + b"[" * 70 + b"]" * 70 + b"}"])
def test_deeply_nested_json_is_a_400_not_a_crash(raw):
    with pytest.raises(OpenAIError) as info:
        parse_json_body(raw, max_bytes=len(raw) + 1)
    assert info.value.status == 400 and "deeper than" in info.value.message


def test_ordinary_nesting_passes_the_depth_check():
    body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}],
            "tools": [{"function": {"parameters": {"properties": {"a": {"items": {}}}}}}]}
    assert parse_json_body(json.dumps(body).encode(), max_bytes=10_000) == body


@pytest.mark.parametrize(("field", "value"), [
    ("model", "gpt-4.1\x00"), ("model", "gpt\ud800"), ("model", "a\nb"),
    ("user", "bob\x1b[31m"), ("metadata", {"k\x00": "v"}),
])
def test_control_characters_and_lone_surrogates_are_refused_in_names(field, value):
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}], field: value}
    with pytest.raises(OpenAIError) as info:
        validate_chat_request(body)
    assert info.value.status == 400 and info.value.param in (field, "model")


def test_text_may_hold_any_character():
    body = {"model": "m", "messages": [{"role": "user", "content": "tab\there\nnewline"}],
            "user": "alice@example.com", "metadata": {"ticket": "A-1"}}
    assert validate_chat_request(body).model == "m"


@pytest.mark.parametrize("raw", [b"null", b"1", b"true", b'"text"'])
def test_a_scalar_body_is_a_400_not_a_crash(raw):
    body = parse_json_body(raw, max_bytes=100)
    with pytest.raises(OpenAIError) as info:
        validate_chat_request(body)
    assert info.value.status == 400


@pytest.mark.parametrize("raw", [b'{"temperature": NaN}', b'{"top_p": Infinity}',
                                 b'{"x": -Infinity}'])
def test_nan_and_infinity_are_not_json(raw):
    with pytest.raises(OpenAIError) as info:
        parse_json_body(raw, max_bytes=100)
    assert info.value.status == 400 and info.value.code == "invalid_json"


def test_a_lone_surrogate_anywhere_in_the_body_is_a_400_and_a_valid_pair_is_text():
    for raw in (b'{"model":"m","messages":[{"role":"user","content":"a\\ud800b"}]}',
                b'{"model":"m","messages":[{"role":"user","content":"\\uDFFF"}]}',
                b'{"model":"m","messages":[],"tools":[{"x":["\\udbff"]}]}'):  # fmt: skip
        with pytest.raises(OpenAIError) as info:
            parse_json_body(raw, 1 << 20)
        assert info.value.status == 400 and "surrogate" in info.value.message
    pair = parse_json_body(b'{"content":"\\ud83d\\ude00 \\u00e9"}', 1 << 20)
    assert pair == {"content": "\U0001f600 \u00e9"}
