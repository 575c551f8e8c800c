"""The running simulator, reached over HTTP like a provider: httpx and the openai SDK."""

import hashlib
import json
import time

import httpx
import openai
import pytest

from gateway.devtools.sim.tokens import REPLY_PRIMING_TOKENS, message_tokens

HELLO = [{"role": "user", "content": "Say hello to the gateway."}]


@pytest.fixture
def client(sim):
    return openai.OpenAI(base_url=sim.provider_url("openai"), api_key="sk-sim-test",
                         max_retries=0, timeout=10)


def test_sdk_gets_a_chat_completion_with_usage_consistent_with_the_prompt(client):
    reply = client.chat.completions.create(model="gpt-4.1", messages=HELLO, max_tokens=20)
    assert reply.object == "chat.completion"
    assert reply.model == "gpt-4.1"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content
    expected_prompt = message_tokens(HELLO[0]) + REPLY_PRIMING_TOKENS
    assert reply.usage.prompt_tokens == expected_prompt
    assert 1 <= reply.usage.completion_tokens <= 20
    assert reply.usage.total_tokens == expected_prompt + reply.usage.completion_tokens


def test_provider_prefix_is_optional(sim):
    body = {"model": "deepseek-chat", "messages": HELLO}
    for url in (sim.base_url + "/v1/chat/completions",
                sim.provider_url("deepseek") + "/chat/completions"):
        assert httpx.post(url, json=body).json()["object"] == "chat.completion"
    assert sim.stats()["requests"] == {"deepseek-chat": 2}


def test_models_lists_every_upstream_model_and_unknown_ones_are_404(client):
    ids = {m.id for m in client.models.list()}
    assert {"gpt-4.1", "deepseek-chat", "claude-sonnet-4-5", "gemini-2.5-flash"} <= ids
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="deepseek-v3.2", messages=HELLO)


def test_bad_json_is_a_400_in_openai_shape(sim):
    response = httpx.post(sim.base_url + "/v1/chat/completions", content=b"{nope")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_stream_chunks_arrive_incrementally(sim, client):
    sim.set_behaviour("gpt-4o", ttft_ms=10, per_token_ms=30, jitter=0,
                      completion_tokens=[30, 30])
    arrivals, text = [], []
    stream = client.chat.completions.create(model="gpt-4o", messages=HELLO, stream=True)
    for chunk in stream:
        arrivals.append(time.monotonic())
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
    assert len(text) == 30
    # 29 gaps of 30 ms: the first chunk is in hand long before the last is sent
    assert arrivals[-1] - arrivals[0] >= 0.4


def test_stream_has_a_usage_chunk_only_when_include_usage_is_set(client):
    plain = list(client.chat.completions.create(model="gpt-4o", messages=HELLO, stream=True))
    assert all(c.usage is None for c in plain)
    assert plain[-1].choices[0].finish_reason in ("stop", "length")

    chunks = list(client.chat.completions.create(
        model="gpt-4o", messages=HELLO, stream=True, stream_options={"include_usage": True}))
    *body, last = chunks
    assert last.choices == [] and last.usage is not None
    assert all(c.usage is None for c in body)
    pieces = sum(1 for c in body if c.choices and c.choices[0].delta.content)
    assert last.usage.completion_tokens == pieces
    assert last.usage.prompt_tokens == message_tokens(HELLO[0]) + REPLY_PRIMING_TOKENS


def test_raw_stream_is_sse_ending_with_done(sim):
    body = {"model": "gpt-4o", "messages": HELLO, "stream": True}
    with httpx.stream("POST", sim.base_url + "/v1/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    assert events[-1] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events)
    first = json.loads(events[0][6:])
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"]["role"] == "assistant"


def test_n_choices_and_tool_calls_through_the_sdk(client):
    reply = client.chat.completions.create(model="gpt-4.1-mini", messages=HELLO, n=2)
    assert [c.index for c in reply.choices] == [0, 1]
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}}}}
    reply = client.chat.completions.create(model="gpt-4.1-mini", messages=HELLO, tools=[tool])
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup"
    assert "query" in json.loads(call.function.arguments)
    streamed = client.chat.completions.create(model="gpt-4.1-mini", messages=HELLO,
                                              tools=[tool], stream=True)
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or ""
                        for c in streamed if c.choices and c.choices[0].delta.tool_calls)
    assert "query" in json.loads(arguments)


def test_a_stream_of_several_choices_ends_each_and_counts_them_all(client):
    chunks = list(client.chat.completions.create(
        model="gpt-4.1-mini", messages=HELLO, n=3, stream=True,
        stream_options={"include_usage": True}))
    pieces = {0: 0, 1: 0, 2: 0}
    finished = set()
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        pieces[choice.index] += bool(choice.delta.content)
        if choice.finish_reason:
            finished.add(choice.index)
    assert finished == {0, 1, 2}
    assert chunks[-1].usage.completion_tokens == sum(pieces.values())


def test_the_same_seed_gets_the_same_answer(client):
    def ask(seed):
        reply = client.chat.completions.create(model="gpt-4o", messages=HELLO, seed=seed)
        return reply.choices[0].message.content, reply.usage.completion_tokens

    assert ask(42) == ask(42)
    assert len({ask(seed) for seed in range(5)}) > 1


def test_json_mode_content_is_valid_json(client):
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO,
                                           response_format={"type": "json_object"})
    assert isinstance(json.loads(reply.choices[0].message.content), dict)


def test_authorization_is_kept_only_as_a_count_and_a_hash(sim, client):
    client.chat.completions.create(model="gpt-4.1", messages=HELLO)
    httpx.post(sim.base_url + "/v1/chat/completions", json={"model": "gpt-4.1",
                                                           "messages": HELLO})
    stats = sim.stats()
    assert stats["requests"]["gpt-4.1"] == 2
    assert stats["with_bearer"]["gpt-4.1"] == 1
    fingerprint = hashlib.sha256(b"sk-sim-test").hexdigest()[:12]
    assert stats["bearer_sha256"] == {fingerprint: 1}
    everything = json.dumps([stats, sim.recent_requests()])
    assert "sk-sim-test" not in everything


def test_recent_requests_show_parameters_and_header_names(sim, client):
    client.chat.completions.create(model="gpt-4.1", messages=HELLO, temperature=0.3,
                                   extra_body={"custom_field": 7},
                                   extra_headers={"x-trace": "t1"})
    (seen,) = sim.recent_requests()
    assert seen["params"]["temperature"] == 0.3
    assert seen["params"]["custom_field"] == 7
    assert "x-trace" in seen["header_names"]
    assert seen["provider"] == "openai"


def test_reset_zeroes_counters_and_restores_behaviour(sim, client):
    sim.set_behaviour("gpt-4o", per_token_ms=50)
    client.chat.completions.create(model="gpt-4o", messages=HELLO)
    sim.reset()
    assert sim.stats()["total"] == 0
    behaviour = httpx.get(sim.base_url + "/_sim/behaviour").json()
    assert behaviour["models"]["gpt-4o"]["per_token_ms"] == 1
