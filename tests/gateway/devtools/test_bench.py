"""The bench's requests: one prompt and length cap, in the shape of each API."""

import json

import pytest

from gateway.devtools.bench import ENDPOINT_PATHS, Load, Target, has_first_token, request_body


@pytest.mark.parametrize("endpoint", list(ENDPOINT_PATHS))
def test_each_target_calls_its_own_api_path(endpoint):
    t = Target("gateway", "http://127.0.0.1:1/v1/", "m", endpoint=endpoint)
    assert t.url == "http://127.0.0.1:1/v1" + ENDPOINT_PATHS[endpoint]


def test_bodies_carry_the_prompt_in_each_apis_field():
    load = Load(prompt="Hi", max_tokens=8, stream=True)
    chat = json.loads(request_body("m", load))
    assert chat["messages"][0]["content"] == "Hi" and chat["max_tokens"] == 8
    assert chat["stream_options"] == {"include_usage": True}
    responses = json.loads(request_body("m", load, "responses"))
    assert responses["input"] == "Hi" and responses["max_output_tokens"] == 8
    assert "stream_options" not in responses and responses["stream"] is True
    assert json.loads(request_body("m", load, "completions"))["prompt"] == "Hi"
    embeddings = json.loads(request_body("m", load, "embeddings"))
    assert embeddings == {"model": "m", "input": "Hi", "encoding_format": "float"}


def test_the_first_token_of_a_responses_or_legacy_stream_is_seen():
    assert has_first_token(b'data: {"type":"response.output_text.delta","delta":"He"}')
    assert has_first_token(b'data: {"choices":[{"text":"He"}]}')
    assert not has_first_token(b'data: {"choices":[{"text":""}]}')


def test_a_messages_body_always_has_max_tokens_and_no_stream_options():
    streamed = json.loads(request_body("m", Load(prompt="Hi", max_tokens=8, stream=True),
                                       "messages"))
    assert streamed == {"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                        "max_tokens": 8, "stream": True}
    uncapped = json.loads(request_body("m", Load(prompt="Hi", max_tokens=0), "messages"))
    assert uncapped["max_tokens"] > 0
    assert has_first_token(b'data: {"type":"content_block_delta","index":0,'
                           b'"delta":{"type":"text_delta","text":"He"}}')
    assert not has_first_token(b'data: {"type":"content_block_start","index":0,'
                               b'"content_block":{"type":"text","text":""}}')


def test_the_attributed_target_sends_its_headers_with_the_usual_ones():
    from gateway.cli.bench import ATTRIBUTION_HEADERS
    from gateway.devtools.bench import _headers

    target = Target("attributed", "http://g/v1", "m", "cg-key", headers=ATTRIBUTION_HEADERS)
    headers = _headers(target)
    assert headers["authorization"] == "Bearer cg-key"
    assert headers["x-costgate-user"] and headers["x-costgate-session"]
    assert headers["x-costgate-tags"].count("=") == 3
    assert "x-costgate-user" not in _headers(Target("gateway", "http://g/v1", "m", "cg-key"))
