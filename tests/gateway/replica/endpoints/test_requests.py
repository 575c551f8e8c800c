"""What the embeddings, legacy completions and Responses validators accept, refuse (with
OpenAI's `param`), send upstream and count when usage is missing."""

from __future__ import annotations

import pytest

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.endpoints.requests import (
    MAX_EMBEDDING_INPUTS,
    completions_body,
    prompt_messages,
    responses_messages,
    validate_completions_request,
    validate_embeddings_request,
    validate_responses_request,
    with_model,
)


@pytest.mark.parametrize("given", ["text", ["a", "b"], [1, 2, 3], [[1, 2], [3]]])
def test_embeddings_take_strings_and_token_arrays(given):
    req = validate_embeddings_request({"model": "e", "input": given, "dimensions": 8,
                                       "encoding_format": "base64", "vendor": 1})
    assert req.model == "e" and not req.stream and req.body["vendor"] == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "e"}, "input"),
        ({"model": "e", "input": ""}, "input"),
        ({"model": "e", "input": []}, "input"),
        ({"model": "e", "input": [[1], "a"]}, "input[1]"),
        ({"model": "e", "input": [[-1]]}, "input[0]"),
        ({"model": "e", "input": "x", "dimensions": 0}, "dimensions"),
        ({"model": "e", "input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"input": "x"}, "model"),
    ],
)
def test_embeddings_refuse_what_openai_refuses(body, param):
    with pytest.raises(OpenAIError) as err:
        validate_embeddings_request(body)
    assert err.value.status == 400 and err.value.param == param


def test_embeddings_refuse_more_inputs_than_openai_takes():
    with pytest.raises(OpenAIError, match="at most"):
        validate_embeddings_request({"model": "e", "input": ["x"] * (MAX_EMBEDDING_INPUTS + 1)})


def test_a_completions_stream_asks_the_upstream_for_usage_without_telling_the_client():
    req = validate_completions_request({"model": "m", "prompt": "p", "stream": True,
                                        "max_tokens": 5})
    assert req.stream and not req.include_usage and req.max_tokens == 5
    body = completions_body(req, "up")
    assert body["model"] == "up" and body["stream_options"] == {"include_usage": True}
    assert "stream_options" not in completions_body(
        validate_completions_request({"model": "m", "prompt": "p"}), "up")


def test_a_response_needs_an_input_unless_something_stands_in_for_it():
    with pytest.raises(OpenAIError) as err:
        validate_responses_request({"model": "m"})
    assert err.value.param == "input"
    req = validate_responses_request({"model": "m", "previous_response_id": "resp_1"})
    assert req.model == "m"
    req = validate_responses_request({"model": "m", "input": "x", "max_output_tokens": 9,
                                      "stream": True, "store": False})
    assert req.stream and req.max_tokens == 9 and with_model(req, "up") == {
        "model": "up", "input": "x", "max_output_tokens": 9, "stream": True, "store": False}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "input": [1]}, "input[0]"),
        ({"model": "m", "input": "x", "instructions": 3}, "instructions"),
        ({"model": "m", "input": "x", "tools": {}}, "tools"),
        ({"model": "m", "input": "x", "temperature": "hot"}, "temperature"),
    ],
)
def test_responses_refuse_bad_fields_with_their_param(body, param):
    with pytest.raises(OpenAIError) as err:
        validate_responses_request(body)
    assert err.value.param == param


def test_estimates_read_prompts_inputs_and_response_items():
    assert prompt_messages("hi") == [{"role": "user", "content": "hi"}]
    # token ids: each counts as at least one token
    assert prompt_messages([[1, 2]]) == [{"role": "user", "content": [1, 2]}]
    msgs = responses_messages({"instructions": "Be brief.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"type": "function_call_output", "call_id": "c", "output": "42"}]})
    assert msgs[0] == {"role": "system", "content": "Be brief."}
    assert msgs[2]["content"] == "42"
